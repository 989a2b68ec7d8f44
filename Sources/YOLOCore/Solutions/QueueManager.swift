import Foundation

/// Counts the tracked objects standing in a queue polygon in every frame, as Ultralytics 8.4.190's
/// `solutions.QueueManager`: a track counts when its box centre is strictly inside the polygon
/// and it was seen before (a track's first frame never counts).
///
/// ```swift
/// var queue = try QueueManager(region: SolutionRegion([[100, 60], [540, 60], [540, 300], [100, 300]]))
/// let waiting = queue.update(try tracker.update(frame), retiredIDs: tracker.removedTracks.map(\.id)).queue
/// ```
public struct QueueManager: Sendable {
    /// One frame's queue.
    public struct Counts: Sendable, Equatable, Codable {
        public var frame: Int?
        /// Objects in the queue.
        public var queue = 0
        /// Tracks in this frame.
        public var tracks = 0
    }

    public let region: SolutionRegion
    public private(set) var counts = Counts()
    private var history = TrackHistory()

    /// - Throws: `SolutionError.invalidRegion` for a line.
    public init(region: SolutionRegion) throws {
        guard !region.isLine else {
            throw SolutionError.invalidRegion(region.description, reason: "a queue needs a polygon of three or more points")
        }
        self.region = region
    }

    /// The queue in the next frame, after forgetting `retiredIDs` (the tracks the tracker removed
    /// in this frame); boxes without an ID are ignored.
    @discardableResult
    public mutating func update(_ results: Results, retiredIDs: [Int] = []) -> Counts {
        history.forget(retiredIDs)
        let tracked = trackedBoxes(results)
        let queued = tracked.filter { id, box in
            let line = history.record(id, box)
            return line.count > 1 && region.contains(line[line.count - 1])
        }
        counts = Counts(frame: results.frame, queue: queued.count, tracks: tracked.count)
        return counts
    }

    /// The frame with the tracked boxes, the queue's outline and its count.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try results.solutionCanvas()
        canvas.drawRegion(region, color: RGB(0xFFFFFF), thickness: 4)
        canvas.drawPanel(["Queue Counts : \(counts.queue)"])
        return canvas
    }
}

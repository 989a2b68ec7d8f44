import Foundation

/// Counts tracked objects crossing a line or passing through a polygon, in and out, in total and
/// per class, as Ultralytics 8.4.190's `solutions.ObjectCounter` counts them.
///
/// ```swift
/// var counter = try ObjectCounter(region: SolutionRegion([[320, 0], [320, 360]]))
/// var tracker = ObjectTracker(.bytetrack)
/// for await frame in YOLOSession(model: model, source: .video(url)).results {
///     let tracked = try tracker.update(frame)
///     let counts = counter.update(tracked, retiredIDs: tracker.removedTracks.map(\.id))
///     print(counts.in, counts.out, counts.classwise)
/// }
/// ```
///
/// The rules: a track counts once, when the step between its last two box centres
/// - crosses the line (touching it counts): "in" when moving right across a line closer to
///   vertical, down across one closer to horizontal; "out" the other way;
/// - or ends inside the polygon, or cuts through it from outside (an object too fast to leave a
///   centre inside): "in" when moving right through a polygon taller than wide, down through
///   one at least as wide as tall; "out" the other way.
/// A track retired by the tracker is forgotten, so its ID could count again if it came back.
public struct ObjectCounter: Sendable {
    /// Totals and this frame's crossings.
    public struct Counts: Sendable, Equatable, Codable {
        /// Index of the frame in its source, when the results carry one.
        public var frame: Int?
        public var `in` = 0, out = 0
        /// Per class name: {"IN", "OUT"}, for the classes counted at least once.
        public var classwise = [String: Directions]()
        /// Tracks in this frame.
        public var tracks = 0
        /// The tracks counted in this frame.
        public var events = [CountEvent]()

        private enum CodingKeys: String, CodingKey { case frame, `in`, out, classwise, tracks }
    }

    /// One class's totals, coded as Ultralytics' `{"IN", "OUT"}`.
    public struct Directions: Sendable, Equatable, Codable {
        public var `in` = 0, out = 0

        public init(in: Int = 0, out: Int = 0) { (self.in, self.out) = (`in`, out) }

        private enum CodingKeys: String, CodingKey { case `in` = "IN", out = "OUT" }
    }

    public let region: SolutionRegion
    /// The totals so far, and the last frame's tracks and crossings.
    public private(set) var counts = Counts()
    private var history = TrackHistory()
    private var counted = Set<Int>()

    public init(region: SolutionRegion) {
        self.region = region
    }

    /// Counts the tracked boxes of the next frame (boxes without an ID are ignored) after
    /// forgetting `retiredIDs`, the tracks the tracker removed in this frame
    /// (`ObjectTracker.removedTracks`); returns the totals with this frame's events.
    @discardableResult
    public mutating func update(_ results: Results, retiredIDs: [Int] = []) -> Counts {
        history.forget(retiredIDs)
        counted.subtract(retiredIDs)
        let tracked = trackedBoxes(results)
        counts.frame = results.frame
        counts.tracks = tracked.count
        counts.events = []
        for (id, box) in tracked {
            let line = history.record(id, box)
            guard line.count > 1, !counted.contains(id), let incoming = direction(from: line[line.count - 2], to: line[line.count - 1]) else {
                continue
            }
            counted.insert(id)
            if incoming {
                counts.in += 1
                counts.classwise[box.name, default: Directions()].in += 1
            } else {
                counts.out += 1
                counts.classwise[box.name, default: Directions()].out += 1
            }
            counts.events.append(CountEvent(frame: results.frame, id: id, cls: box.cls, name: box.name, direction: incoming ? .in : .out))
        }
        return counts
    }

    /// Whether the step from `previous` to `current` counts, and then whether it is "in".
    private func direction(from previous: SIMD2<Double>, to current: SIMD2<Double>) -> Bool? {
        let extent = region.extent
        if region.isLine {
            guard region.intersects(previous, current) else { return nil }
            return extent.x < extent.y ? current.x > previous.x : current.y > previous.y
        }
        guard region.contains(current) || (!region.contains(previous) && region.crosses(previous, current)) else { return nil }
        return extent.x < extent.y ? current.x > previous.x : current.y > previous.y
    }

    /// The frame with the tracked boxes, the region and the per-class counts drawn.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try results.solutionCanvas()
        canvas.drawRegion(region, color: RGB(0x7B0068), thickness: 4)
        let lines = counts.classwise.sorted { $0.key < $1.key }.filter { $0.value.in + $0.value.out > 0 }
            .map { "\($0.key.capitalized): IN \($0.value.in) OUT \($0.value.out)" }
        canvas.drawPanel(lines)
        return canvas
    }
}

/// A track counted: when, which, and which way.
public struct CountEvent: Sendable, Equatable, Codable {
    public enum Direction: String, Sendable, Codable { case `in`, out }

    public var frame: Int?
    public var id: Int
    public var cls: Int
    /// The class name.
    public var name: String
    public var direction: Direction

    /// The columns of `csvLine`.
    public static let csvHeader = "frame,id,class,name,direction"

    /// One CSV line, `csvHeader`'s columns.
    public var csvLine: String { "\(frame.map(String.init) ?? ""),\(id),\(cls),\(Results.csvField(name)),\(direction.rawValue)\n" }
}

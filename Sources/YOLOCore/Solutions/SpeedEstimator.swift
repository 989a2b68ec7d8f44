import Foundation

/// A speed per tracked object, as Ultralytics 8.4.190's `solutions.SpeedEstimator` estimates it:
/// once a track has `historyLength` box centres, its speed is the straight distance from the
/// first to the last, in metres (`metersPerPixel`), over the frames since the track was first
/// seen (`fps`), in km/h capped at `maxSpeed` and truncated to a whole number; it then stays
/// fixed for the track's life.
///
/// ```swift
/// var speeds = try SpeedEstimator(metersPerPixel: 0.05, fps: 25)
/// let kmh = speeds.update(try tracker.update(frame), retiredIDs: tracker.removedTracks.map(\.id)).speeds
/// ```
public struct SpeedEstimator: Sendable {
    /// One frame's speeds.
    public struct Speeds: Sendable, Equatable, Codable {
        public var frame: Int?
        /// km/h by track ID, for this frame's tracks whose speed is known.
        public var speeds = [Int: Int]()
        /// Tracks in this frame.
        public var tracks = 0
    }

    public let metersPerPixel: Double
    /// The source's frames per second.
    public let fps: Double
    /// The highest speed reported, km/h.
    public let maxSpeed: Double
    /// Centres collected before a speed is computed, ≥ 2.
    public let historyLength: Int
    public private(set) var speeds = Speeds()

    private var frame = 0
    /// Per track still measuring: the frame it was first seen and its last centres.
    private var measuring = [Int: (first: Int, centres: [SIMD2<Double>])]()
    /// Per track measured: its speed.
    private var locked = [Int: Int]()

    /// Ultralytics' defaults: 0.05 m per pixel, 30 frames/s, 120 km/h, 5 centres.
    /// - Throws: `SolutionError.invalidArgument` for a scale, rate or cap that is not a positive
    ///   number, or a history shorter than 2.
    public init(metersPerPixel: Double = 0.05, fps: Double = 30, maxSpeed: Double = 120, historyLength: Int = 5) throws {
        for (name, value) in [("metersPerPixel", metersPerPixel), ("fps", fps), ("maxSpeed", maxSpeed)] where !(value > 0 && value.isFinite) {
            throw SolutionError.invalidArgument(name: name, value: "\(value)", reason: "must be a positive number")
        }
        guard historyLength >= 2 else {
            throw SolutionError.invalidArgument(name: "historyLength", value: "\(historyLength)", reason: "must be at least 2 centres")
        }
        (self.metersPerPixel, self.fps, self.maxSpeed, self.historyLength) = (metersPerPixel, fps, maxSpeed, historyLength)
    }

    /// The speeds in the next frame, after forgetting `retiredIDs` (the tracks the tracker removed
    /// in this frame); boxes without an ID are ignored.
    @discardableResult
    public mutating func update(_ results: Results, retiredIDs: [Int] = []) -> Speeds {
        frame += 1
        for id in retiredIDs {
            measuring[id] = nil
            locked[id] = nil
        }
        let tracked = trackedBoxes(results)
        for (id, box) in tracked where locked[id] == nil {
            var track = measuring[id] ?? (frame, [])
            track.centres.append(centre(box))
            if track.centres.count > historyLength { track.centres.removeFirst() }
            measuring[id] = track
            let seconds = Double(frame - track.first) / fps
            if track.centres.count == historyLength, seconds > 0 {
                let d = track.centres[historyLength - 1] - track.centres[0]
                let kmh = (d.x * d.x + d.y * d.y).squareRoot() * metersPerPixel / seconds * 3.6
                locked[id] = Int(min(kmh, maxSpeed))
                measuring[id] = nil
            }
        }
        speeds = Speeds(frame: results.frame, speeds: Dictionary(tracked.compactMap { id, _ in locked[id].map { (id, $0) } },
                                                                uniquingKeysWith: { a, _ in a }),
                        tracks: tracked.count)
        return speeds
    }

    /// The frame with each measured track's box, labelled with its speed.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try solutionImage(results)
        for (id, box) in trackedBoxes(results) {
            guard let kmh = speeds.speeds[id] else { continue }
            let c = box.xyxy.map(pixel)
            canvas.strokeRectangle(x0: c[0], y0: c[1], x1: c[2], y1: c[3], thickness: 2, color: classColor(id))
            canvas.drawLabel("\(kmh) km/h", x: c[0], y: c[1], lineWidth: 2)
        }
        return canvas
    }
}

import Foundation

/// A multi-object tracker: it gives the boxes of consecutive frames of one source identities
/// that persist across frames. Ultralytics 8.4.190's `BYTETracker`, `BOTSORT` (without ReID and
/// camera-motion compensation), `TRACKTRACK`, `OCSORT`, `FASTTracker` and `DeepOCSORT` (without
/// ReID and camera-motion compensation), or the spatial lifecycle tracker, as the configuration's
/// `algorithm` says. A value: copies track independently.
///
/// ```swift
/// var tracker = ObjectTracker(.bytetrack)
/// for frame in frames {
///     let boxes = tracker.update(detector(frame))        // boxes from any detector
///     for box in boxes { print(box.id ?? -1, box.name) }
/// }
/// ```
///
/// Feed the Ultralytics trackers every frame, with detections down to confidence 0.1
/// (`model.track` lowers the detector's confidence to 0.1): low-confidence boxes keep existing
/// tracks alive. TrackTrack compensates camera motion from the frames themselves: track
/// `Results` that carry their image (`update(_:)` on results), or it tracks as if the camera
/// stood still.
public struct ObjectTracker: Sendable {
    /// The algorithm and thresholds, fixed for the tracker's life.
    public let configuration: TrackerConfiguration
    /// How many past positions each track keeps in `Track.history`, ≥ 0.
    public var historyLength: Int = 30
    /// Updates since the tracker was made or reset; the first is frame 1.
    public private(set) var frame = 0
    /// The tracks that became removed in the last update.
    public private(set) var removedTracks: [Track] = []

    private var engine: any TrackingEngine
    private var expiry: Expiry

    /// A tracker with no track yet; its first update is frame 1.
    public init(_ configuration: TrackerConfiguration = .bytetrack) {
        self.configuration = configuration
        expiry = Expiry(seconds: configuration.expireAfter)
        engine = switch configuration.algorithm {
        case .tracktrack: TrackTrack(configuration)
        case .spatial: SpatialTracker(configuration)
        case .bytetrack, .botsort, .ocsort, .fasttrack, .deepocsort: ByteTracker(configuration)
        }
    }

    /// Forgets every track; IDs start again at 1.
    public mutating func reset() {
        let length = historyLength
        self = ObjectTracker(configuration)
        historyLength = length
    }

    /// The tracks alive after the last update, in the tracker's order: for the Ultralytics
    /// trackers tracked ones first (tentative, confirmed), then lost ones; for the spatial
    /// tracker candidates, confirmed and stale tracks by ID.
    public var tracks: [Track] { engine.tracks(frame: frame) }

    /// Tracks the boxes of the next frame and returns what Ultralytics reports for it: the
    /// confirmed tracks matched in this frame (ByteTrack, BoT-SORT, OC-SORT and Deep OC-SORT:
    /// every confirmed track still tracked), in track order, each with its `id`, the Kalman
    /// filter's box clipped to the image and its detection's confidence and class. When no
    /// track is reported, the input boxes as they are (no `id`), or none while a new track waits
    /// for confirmation. The spatial tracker returns its confirmed tracks matched in this frame,
    /// smoothed, each with its `id`, and nothing else.
    /// `time`: the frame's time in seconds (any origin, increasing), for `expireAfter`.
    public mutating func update(_ boxes: [Box], time: Double? = nil) -> [Box] {
        let detections = boxes.enumerated().compactMap { Detection($0.element, index: $0.offset) }
        return report(step(detections, image: nil, time: time), boxes: boxes)
    }

    /// `update` on a result's boxes (rotated boxes for obb results), with its masks and
    /// keypoints kept with their boxes; the result's image, when it has one, drives TrackTrack's
    /// camera-motion compensation, its `time` `expireAfter`.
    /// - Throws: `TrackingError.unsupportedTask` for classify results.
    public mutating func update(_ results: Results) throws -> Results {
        guard results.task != .classify else { throw TrackingError.unsupportedTask(results.task) }
        let detections = results.task == .obb
            ? results.obb.enumerated().compactMap { Detection($0.element, index: $0.offset) }
            : results.boxes.enumerated().compactMap { Detection($0.element, index: $0.offset) }
        let reported = step(detections, image: results.image, time: results.time?.seconds)
        let indices: [Int]
        switch reported {
        case .tracks(let tracks): indices = tracks.map(\.index)
        case .detections: indices = Array(results.task == .obb ? results.obb.indices : results.boxes.indices)
        case .hidden: indices = []
        }
        var out = Results(path: results.path, task: results.task, originalShape: results.originalShape,
                          inputShape: results.inputShape,
                          boxes: results.task == .obb ? [] : report(reported, boxes: results.boxes),
                          masks: results.masks.isEmpty ? [] : indices.map { results.masks[$0] },
                          keypoints: results.keypoints.isEmpty ? [] : indices.map { results.keypoints[$0] },
                          obb: results.task == .obb ? reportOriented(reported, obb: results.obb) : [],
                          speed: results.speed, image: results.image)
        out.frame = results.frame
        out.time = results.time
        out.lineWidth = results.lineWidth
        return out
    }

    private mutating func step(_ detections: [Detection], image: Image?, time: Double?) -> EngineReport {
        frame += 1
        expiry.record(time, frame: frame)
        let report = engine.update(detections, image: image, frame: frame, historyLength: historyLength, expiry: expiry)
        removedTracks = engine.removedTracks
        return report
    }

    private func report(_ reported: EngineReport, boxes: [Box]) -> [Box] {
        switch reported {
        case .tracks(let tracks): tracks.map(\.box)
        case .detections: boxes
        case .hidden: []
        }
    }

    private func reportOriented(_ reported: EngineReport, obb: [OrientedBox]) -> [OrientedBox] {
        switch reported {
        case .tracks(let tracks): tracks.compactMap(\.orientedBox)
        case .detections: obb
        case .hidden: []
        }
    }
}

/// A track as the tracker sees it after an update.
public struct Track: Sendable, Equatable {
    /// Where a track is in its life. The Ultralytics trackers: `tentative` (started, not yet
    /// confirmed; not reported), `confirmed` (reported with its ID), `lost` (unmatched, kept for
    /// `trackBuffer` frames in case it comes back), `removed` (gone for good). The spatial
    /// tracker: `candidate` (not yet matched in `confirmationFrames` consecutive frames),
    /// `confirmed`, `stale` (unmatched for `staleFrames`, kept for recapture), `lost` (unmatched
    /// for `lostFrames`: gone).
    public enum State: String, Sendable {
        case tentative, confirmed, lost, removed, candidate, stale
    }

    /// The track's ID, from 1.
    public let id: Int
    /// Where the track is in its life after the last update.
    public let state: State
    /// The track's box (Ultralytics trackers: the Kalman filter's, for a lost track where it
    /// is predicted to be, clipped to the image; spatial: the smoothed box), with the
    /// confidence, class and `id` of its detections; for rotated boxes the box enclosing
    /// `orientedBox`.
    public let box: Box
    /// The rotated box, when the tracker tracks obb results.
    public let orientedBox: OrientedBox?
    /// The tracker frame (`ObjectTracker.frame`) the track started and was last matched in.
    public let startFrame: Int, lastSeenFrame: Int
    /// Frames since the track was last matched; 0 when matched in the last update.
    public let framesSinceSeen: Int
    /// The centre of the track's box after each match, oldest first, at most
    /// `ObjectTracker.historyLength` of them: trails to draw.
    public let history: [SIMD2<Float>]
}

/// Why boxes could not be tracked.
public enum TrackingError: Error, LocalizedError, Equatable {
    /// Results of a task without boxes to track.
    case unsupportedTask(YOLOTask)

    public var errorDescription: String? {
        switch self {
        case let .unsupportedTask(task): "\(task) results have no boxes to track; track detect, segment, pose or obb results"
        }
    }
}

/// A detection as the trackers take it: Ultralytics' `Boxes.xywh` (or `OBB.xywhr`), confidence
/// and class, and its index in the input.
struct Detection: Sendable {
    /// Centre x, centre y, width, height, in Float32 as Ultralytics computes them from xyxy.
    var xywh: SIMD4<Float>
    /// The rotated box's angle in radians, nil for axis-aligned boxes.
    var angle: Double?
    var score: Float
    var cls: Int
    var name: String
    var originalShape: [Int]
    var index: Int

    /// Nil for a box without area, which every tracker skips.
    init?(_ box: Box, index: Int) {
        let b = box.xyxy
        guard b.count == 4 else { return nil }
        xywh = SIMD4((b[0] + b[2]) / 2, (b[1] + b[3]) / 2, b[2] - b[0], b[3] - b[1])
        guard xywh[2] > 0, xywh[3] > 0 else { return nil }
        (score, cls, name, originalShape, self.index) = (box.conf, box.cls, box.name, box.originalShape, index)
    }

    init?(_ box: OrientedBox, index: Int) {
        let b = box.xywhr
        guard b.count == 5, b[2] > 0, b[3] > 0 else { return nil }
        xywh = SIMD4(b[0], b[1], b[2], b[3])
        angle = Double(b[4])
        (score, cls, name, originalShape, self.index) = (box.conf, box.cls, box.name, box.originalShape, index)
    }

    /// x1, y1, x2, y2.
    var xyxy: SIMD4<Float> {
        SIMD4(xywh[0] - xywh[2] / 2, xywh[1] - xywh[3] / 2, xywh[0] + xywh[2] / 2, xywh[1] + xywh[3] / 2)
    }
}

/// A tracked box an engine reports, with the index of the input detection it stands for.
struct ReportedTrack: Sendable {
    var box: Box
    var orientedBox: OrientedBox?
    var index: Int
}

/// What an engine reports for a frame.
enum EngineReport: Sendable {
    /// These tracks.
    case tracks([ReportedTrack])
    /// No track: the input as it is, without IDs (Ultralytics reports a frame's detections
    /// when its tracker returns none and no new track waits).
    case detections
    /// Nothing: no track is reported and a new one waits for confirmation.
    case hidden
}

/// One tracking algorithm's state, behind `ObjectTracker`.
protocol TrackingEngine: Sendable {
    /// Tracks frame `frame` (from 1); `image` is the frame itself when known. An unmatched track
    /// goes at the engine's frame limit or when `expiry` says so, whichever comes first.
    mutating func update(_ detections: [Detection], image: Image?, frame: Int, historyLength: Int, expiry: Expiry) -> EngineReport
    /// The tracks alive after the last update.
    func tracks(frame: Int) -> [Track]
    /// The tracks removed in the last update.
    var removedTracks: [Track] { get }
}

/// `TrackerConfiguration.expireAfter`: the times of the recent frames, and whether a track
/// unmatched since a frame has outlived it.
struct Expiry: Sendable {
    let seconds: Double?
    /// Times of the last frames (at most 1024), the current frame's last; nil where unknown.
    private var times: [Double?] = []
    private var frame = 0

    init(seconds: Double?) { self.seconds = seconds }

    mutating func record(_ time: Double?, frame: Int) {
        guard seconds != nil else { return }
        times = times.suffix(1023) + [time]
        self.frame = frame
    }

    /// Whether more than `seconds` passed since frame `lastSeen`; for a frame older than those
    /// remembered, since the oldest one (a lower bound: past it, the frame limits apply).
    func expired(lastSeen: Int) -> Bool {
        guard let seconds, lastSeen < frame, let now = times.last ?? nil,
              let then = times[max(times.count - 1 - (frame - lastSeen), 0)] else { return false }
        return now - then > seconds
    }
}

/// 1 − IoU of every box of `a` with every box of `b` (xyxy), row-major, as Ultralytics'
/// `iou_distance`.
package func iouDistance(_ a: [SIMD4<Float>], _ b: [SIMD4<Float>]) -> [Float] {
    var distance = pairwiseIoU(a, b)
    for k in distance.indices { distance[k] = 1 - distance[k] }
    return distance
}

/// Ultralytics' `bbox_ioa`: the intersection of every box of `a` with every box of `b` (xyxy)
/// over the area of the one of `b`, row-major, in Float32.
func intersectionOverArea(_ a: [SIMD4<Float>], _ b: [SIMD4<Float>]) -> [Float] {
    var out = [Float](repeating: 0, count: a.count * b.count)
    for (i, p) in a.enumerated() {
        for (j, q) in b.enumerated() {
            let inter = max(min(p[2], q[2]) - max(p[0], q[0]), 0) * max(min(p[3], q[3]) - max(p[1], q[1]), 0)
            out[i * b.count + j] = inter / ((q[2] - q[0]) * (q[3] - q[1]) + 1e-7)
        }
    }
    return out
}

/// `x` clipped to the image of `shape` (height, width), as `Results.update` clips boxes.
func clipped(_ b: SIMD4<Float>, to shape: [Int]) -> SIMD4<Float> {
    guard shape.count >= 2 else { return b }
    let w = Float(shape[1]), h = Float(shape[0])
    return SIMD4(min(max(b[0], 0), w), min(max(b[1], 0), h), min(max(b[2], 0), w), min(max(b[3], 0), h))
}

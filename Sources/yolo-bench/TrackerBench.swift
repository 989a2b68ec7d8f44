import ArgumentParser
import Dispatch
import Foundation
import Tensor
import YOLOCore

/// `yolo-bench tracker`: the time of one `ObjectTracker.update` on a synthetic video scene of
/// `--detections` objects, per tracker, after the tracks have formed.
struct TrackerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracker", abstract: "Measure the tracker's update time on a synthetic scene.")

    enum Algorithm: String, ExpressibleByArgument, CaseIterable {
        case bytetrack, botsort
    }

    @Option(help: "Objects in the scene (detections per frame).")
    var detections = 100

    @Option(help: "Frames per run; the first 30 are warm-up, untimed.")
    var frames = 300

    @Option(help: "Runs of the whole scene per tracker, alternating trackers.")
    var repetitions = 5

    @Option(help: "The tracker to time (bytetrack or botsort); both when omitted.")
    var tracker: Algorithm?

    private static let warmup = 30

    func validate() throws {
        guard (1...10_000).contains(detections) else { throw ValidationError("--detections must be in 1...10000, got \(detections)") }
        guard frames > Self.warmup else { throw ValidationError("--frames must exceed the \(Self.warmup) warm-up frames, got \(frames)") }
        guard (1...1000).contains(repetitions) else { throw ValidationError("--repetitions must be in 1...1000, got \(repetitions)") }
    }

    func run() {
        let scene = syntheticScene(objects: detections, frames: frames)
        let algorithms = tracker.map { [$0] } ?? Algorithm.allCases
        var updates = [Algorithm: [Double]](), assignments = [Algorithm: [Double]](), reported = [Algorithm: [Double]]()
        for _ in 0..<repetitions {
            for algorithm in algorithms {
                let configuration: TrackerConfiguration = algorithm == .bytetrack ? .bytetrack : .botsort
                var tracker = ObjectTracker(configuration)
                var previous = [Box]()
                for (i, boxes) in scene.enumerated() {
                    if i >= Self.warmup {
                        assignments[algorithm, default: []].append(
                            firstAssociationMilliseconds(previous, boxes, configuration))
                    }
                    let start = DispatchTime.now().uptimeNanoseconds
                    previous = tracker.update(boxes)
                    if i >= Self.warmup {
                        updates[algorithm, default: []].append(milliseconds(since: start))
                        reported[algorithm, default: []].append(Double(previous.count))
                    }
                }
            }
        }
        print("scene: \(detections) objects, \(frames) frames (\(Self.warmup) warm-up), \(repetitions) runs per tracker; "
              + "CPU: \(CPU.modelName)")
        print("")
        print("| tracker | median ms | mean ± sd ms | p10 ms | p90 ms | first assignment median ms | tracks reported |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for algorithm in algorithms {
            let l = Latency(samples: updates[algorithm]!), a = Latency(samples: assignments[algorithm]!)
            print("| \(algorithm.rawValue) | \(fixed(l.median, 4)) | \(fixed(l.mean, 4)) ± \(fixed(l.sd, 4)) "
                  + "| \(fixed(l.p10, 4)) | \(fixed(l.p90, 4)) | \(fixed(a.median, 4)) "
                  + "| \(fixed(Latency(samples: reported[algorithm]!).median, 0)) |")
        }
        print("")
        print("first assignment: the solver alone on the first association's matrix (the last frame's tracks "
              + "against this frame's boxes), the largest of the update's three; tracks reported: the median number of boxes an update returns")
    }

    /// The solver's time on about the first association's problem: the boxes reported for the
    /// previous frame against this frame's confident ones, with the tracker's cost and limit.
    private func firstAssociationMilliseconds(_ tracks: [Box], _ boxes: [Box],
                                              _ configuration: TrackerConfiguration) -> Double {
        let confident = boxes.filter { $0.conf >= Float(configuration.trackHighThreshold) }
        var cost = iouDistance(tracks.map { SIMD4($0.xyxy) }, confident.map { SIMD4($0.xyxy) })
        if configuration.fuseScore {
            for k in cost.indices { cost[k] = 1 - (1 - cost[k]) * confident[k % confident.count].conf }
        }
        let costs = cost.map(Double.init)
        let start = DispatchTime.now().uptimeNanoseconds
        _ = linearAssignment(costs, rows: tracks.count, columns: confident.count, costLimit: configuration.matchThreshold)
        return milliseconds(since: start)
    }
}

/// Boxes of `objects` objects over `frames` frames of a 1920×1080 video: each moves smoothly
/// (constant velocity, bouncing off the edges) with a pixel of jitter, so that most boxes match
/// a track, and each frame about one object leaves and a new one appears elsewhere.
/// Confidences spread over 0.1–0.95 and waver by ±0.05 from frame to frame, so that both
/// association passes run. Seeded: every run sees the same scene.
func syntheticScene(objects: Int, frames: Int) -> [[Box]] {
    struct Object {
        var x, y, vx, vy, w, h, conf: Double
        var cls: Int
    }
    var rng = SplitMix64(seed: 26)
    let width = 1920.0, height = 1080.0, names = ["person", "car", "bicycle"]
    func spawn() -> Object {
        let w = Double.random(in: 30...150, using: &rng), h = w * Double.random(in: 0.6...2.5, using: &rng)
        return Object(x: Double.random(in: w / 2...width - w / 2, using: &rng), y: Double.random(in: h / 2...height - h / 2, using: &rng),
                      vx: Double.random(in: -4...4, using: &rng), vy: Double.random(in: -3...3, using: &rng),
                      w: w, h: h, conf: Double.random(in: 0.1...0.95, using: &rng), cls: Int.random(in: 0..<names.count, using: &rng))
    }
    var scene = (0..<objects).map { _ in spawn() }
    let replacement = 1 / Double(objects)
    return (0..<frames).map { _ in
        scene.indices.map { k in
            if Double.random(in: 0..<1, using: &rng) < replacement { scene[k] = spawn() }
            var o = scene[k]
            o.x += o.vx
            o.y += o.vy
            if o.x < o.w / 2 || o.x > width - o.w / 2 { o.vx = -o.vx }
            if o.y < o.h / 2 || o.y > height - o.h / 2 { o.vy = -o.vy }
            scene[k] = o
            let jitter = { Double.random(in: -1...1, using: &rng) }
            let cx = o.x + jitter(), cy = o.y + jitter(), w = o.w + jitter(), h = o.h + jitter()
            let conf = min(max(o.conf + Double.random(in: -0.05...0.05, using: &rng), 0.1), 0.95)
            return Box(xyxy: [Float(cx - w / 2), Float(cy - h / 2), Float(cx + w / 2), Float(cy + h / 2)], conf: Float(conf),
                       cls: o.cls, name: names[o.cls], originalShape: [Int(height), Int(width)])
        }
    }
}

/// Vigna's SplitMix64: a small seeded generator, the same numbers on every platform.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

private func fixed(_ x: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", x) }

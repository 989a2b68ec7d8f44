import ArgumentParser
import Dispatch
import Foundation
import Tensor
import YOLOCore

/// `yolo-bench tracker`: the time of one `ObjectTracker.update` on a synthetic video scene of
/// `--detections` objects, per tracker and scene size, after the tracks have formed.
struct TrackerBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tracker", abstract: "Measure each tracker's update time on synthetic scenes.")

    @Option(help: "Objects in the scene (detections per frame), a comma-separated list.")
    var detections = "10,100,1000"

    @Option(help: "Frames per run; the first 30 are warm-up, untimed.")
    var frames = 300

    @Option(help: "Runs of the whole scene per tracker, alternating trackers.")
    var repetitions = 5

    @Option(help: "The tracker to time (\(TrackerConfiguration.Algorithm.allCases.map(\.rawValue).joined(separator: ", "))); every one when omitted.")
    var tracker: String?

    private static let warmup = 30

    private var sizes: [Int] { detections.split(separator: ",").compactMap { Int($0.trimmingCharacters(in: .whitespaces)) } }

    func validate() throws {
        let parts = detections.split(separator: ",", omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count == sizes.count, sizes.allSatisfy({ (1...10_000).contains($0) }) else {
            throw ValidationError("--detections must be a comma-separated list of numbers in 1...10000, got \(detections)")
        }
        guard frames > Self.warmup else { throw ValidationError("--frames must exceed the \(Self.warmup) warm-up frames, got \(frames)") }
        guard (1...1000).contains(repetitions) else { throw ValidationError("--repetitions must be in 1...1000, got \(repetitions)") }
        if let tracker, TrackerConfiguration.Algorithm(rawValue: tracker) == nil {
            throw ValidationError("--tracker must be one of \(TrackerConfiguration.Algorithm.allCases.map(\.rawValue).joined(separator: ", ")), got \(tracker)")
        }
    }

    func run() {
        let algorithms = tracker.flatMap(TrackerConfiguration.Algorithm.init(rawValue:)).map { [$0] }
            ?? TrackerConfiguration.Algorithm.allCases
        print("scenes: \(frames) frames (\(Self.warmup) warm-up), \(repetitions) runs per tracker; CPU: \(CPU.modelName)")
        print("")
        print("| tracker | boxes | median µs | mean ± sd µs | p10 µs | p90 µs | tracks reported |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for size in sizes {
            let scene = syntheticScene(objects: size, frames: frames)
            var updates = [TrackerConfiguration.Algorithm: [Double]](), reported = [TrackerConfiguration.Algorithm: [Double]]()
            for _ in 0..<repetitions {
                for algorithm in algorithms {
                    var tracker = ObjectTracker(TrackerConfiguration(algorithm: algorithm))
                    for (i, boxes) in scene.enumerated() {
                        let start = DispatchTime.now().uptimeNanoseconds
                        let out = tracker.update(boxes)
                        if i >= Self.warmup {
                            updates[algorithm, default: []].append(milliseconds(since: start) * 1000)
                            reported[algorithm, default: []].append(Double(out.count))
                        }
                    }
                }
            }
            for algorithm in algorithms {
                let l = Latency(samples: updates[algorithm]!)
                print("| \(algorithm.rawValue) | \(size) | \(fixed(l.median, 1)) | \(fixed(l.mean, 1)) ± \(fixed(l.sd, 1)) "
                      + "| \(fixed(l.p10, 1)) | \(fixed(l.p90, 1)) | \(fixed(Latency(samples: reported[algorithm]!).median, 0)) |")
            }
        }
        if algorithms.contains(.tracktrack) {
            let l = Latency(samples: cameraMotionMicroseconds())
            print("| tracktrack, camera motion only | 640×360 frame | \(fixed(l.median, 1)) | \(fixed(l.mean, 1)) ± \(fixed(l.sd, 1)) "
                  + "| \(fixed(l.p10, 1)) | \(fixed(l.p90, 1)) | |")
        }
        print("")
        print("boxes: objects in the scene, each detected every frame; tracks reported: the median number of boxes an update returns. "
              + "TrackTrack's rows without frames; its camera-motion estimate (sparse optical flow) costs the last row more per frame.")
    }

    /// TrackTrack updates without boxes on a textured 640×360 frame panning 3 pixels a frame:
    /// the camera-motion estimate alone.
    private func cameraMotionMicroseconds() -> [Double] {
        var rng = SplitMix64(seed: 26)
        let texture = (0..<(1200 * 400)).map { _ in UInt8.random(in: 0...255, using: &rng) }
        var tracker = ObjectTracker(.tracktrack), samples = [Double]()
        for i in 0..<(frames * repetitions / 10 + Self.warmup) {
            var pixels = [UInt8](repeating: 0, count: 640 * 360 * 3)
            for y in 0..<360 {
                for x in 0..<640 {
                    // A blurred texture: corners to follow, not noise.
                    let v = texture[(y / 4 + 10) * 1200 + (x + 3 * i) / 4]
                    (pixels[(y * 640 + x) * 3], pixels[(y * 640 + x) * 3 + 1], pixels[(y * 640 + x) * 3 + 2]) = (v, v, v)
                }
            }
            let image = try! Image(pixels: pixels, width: 640, height: 360, format: .rgb)
            let results = Results(task: .detect, originalShape: [360, 640], inputShape: [1, 3, 384, 640], image: image)
            let start = DispatchTime.now().uptimeNanoseconds
            _ = try! tracker.update(results)
            if i >= Self.warmup { samples.append(milliseconds(since: start) * 1000) }
        }
        return samples
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

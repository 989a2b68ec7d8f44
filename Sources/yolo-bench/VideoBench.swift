import ArgumentParser
import Dispatch
import Foundation
import YOLOCore

/// `yolo-bench video --model yolo26n --source clip.mp4`: frames per second of a whole
/// `YOLOSession` (ffmpeg decoding, letterbox, inference, post-processing) against the rate the
/// inference alone allows, the time from opening the source to its first frame, and the
/// process's peak resident memory. `--sources N` runs N sessions on the source side by side on
/// one model, as a `.streams` list does, against the rate N single-threaded predictions allow.
struct VideoBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "video", abstract: "Measure a YOLOSession's throughput and peak memory on a video.")

    @Option(help: "A .safetensors path, or a name looked up in $YOLO_WEIGHTS_DIR, Weights/ and the download cache.")
    var model: String

    @Option(help: "The video file or stream.")
    var source: String

    @Option(help: "Predictions on the first frame, alone, to time the inference.")
    var iters = 30

    @Option(help: "Sessions on the source side by side, on one model (each with cores / N threads, at least 1).")
    var sources = 1

    @Option(help: "With --sources: rounds of (one-thread predictions, the sessions, one-thread predictions again).")
    var rounds = 5

    func validate() throws {
        guard iters >= 1 else { throw ValidationError("--iters must be at least 1, got \(iters)") }
        guard sources >= 1 else { throw ValidationError("--sources must be at least 1, got \(sources)") }
        guard rounds >= 1 else { throw ValidationError("--rounds must be at least 1, got \(rounds)") }
    }

    func run() async throws {
        let yolo = try await YOLO(model)
        let url = source.contains("://") ? URL(string: source)! : URL(fileURLWithPath: source)

        // The rate prediction allows: predictions on one frame already in memory, whole
        // (letterbox, inference, post-processing) and the network's pass alone.
        // Opening to the first frame handed to inference: the result's arrival less its own stages.
        // A live source's end ends the run: no reconnection.
        let once = ReconnectPolicy(attempts: 0)
        var first: Image?
        let opening = DispatchTime.now().uptimeNanoseconds
        let opened = try YOLOSession(model: yolo, source: .video(url), reconnect: once)
        for await result in opened.results {
            first = result.image
            let stages = result.speed.preprocess + result.speed.inference + result.speed.postprocess
            print(String(format: "first frame in inference %.0f ms after opening the source", milliseconds(since: opening) - stages))
            break
        }
        opened.stop()
        guard let first else { throw BenchError("\(source) has no frame") }
        if sources > 1 { return try await sideBySide(yolo, url: url, first: first) }
        var whole = [Double](), pass = [Double]()
        for _ in 0..<iters {
            let start = DispatchTime.now().uptimeNanoseconds
            pass.append(try yolo(first).speed.inference)
            whole.append(milliseconds(since: start))
        }
        let prediction = Latency(samples: whole), inference = Latency(samples: pass)

        // The pipeline: frames/s over the whole source, and per frame the interval since the
        // previous result against that frame's own inference, so both come from the same frames.
        let session = try YOLOSession(model: yolo, source: .video(url), reconnect: once)
        let start = DispatchTime.now().uptimeNanoseconds
        var previous = start, frames = 0
        var intervals = [Double](), preprocess = [Double](), inPipeline = [Double](), postprocess = [Double]()
        for await result in session.results {
            let now = DispatchTime.now().uptimeNanoseconds
            if frames > 0 { intervals.append(milliseconds(since: previous, to: now)) }
            previous = now
            frames += 1
            preprocess.append(result.speed.preprocess)
            inPipeline.append(result.speed.inference)
            postprocess.append(result.speed.postprocess)
        }
        let seconds = milliseconds(since: start) / 1e3
        if let error = session.error { throw error }
        guard frames >= 2 else { throw BenchError("\(source) has fewer than 2 frames") }

        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        let fps = Double(frames) / seconds
        print("source: \(source), \(frames) frames in \(String(format: "%.2f", seconds)) s: \(String(format: "%.1f", fps)) frames/s")
        let pipelineInference = Latency(samples: inPipeline)
        for (name, latency) in [("one-frame prediction", prediction), ("one-frame inference", inference),
                                ("in-pipeline inference", pipelineInference)] {
            print("\(name) median " + String(format: "%.2f ms (%.1f frames/s): pipeline ratio %.3f",
                                              latency.median, 1000 / latency.median, fps * latency.median / 1000))
        }
        let interval = Latency(samples: intervals)
        print(String(format: "frame interval median %.2f ms: in-pipeline inference median / interval median %.3f",
                     interval.median, pipelineInference.median / interval.median))
        // The stages of the frames the intervals end at (the first frame has no interval).
        let means = [preprocess, inPipeline, postprocess].map { Latency(samples: Array($0.dropFirst())).mean }
        print(String(format: "per frame (means): %.2f ms = preprocess %.2f + inference %.2f + postprocess %.2f + waiting %.2f",
                     interval.mean, means[0], means[1], means[2], interval.mean - means.reduce(0, +)))
        print(String(format: "peak RSS: %.1f MB", Double(usage.ru_maxrss) / 1024))
    }

    /// `sources` sessions at once, each at cores / `sources` threads: frames/s over all against
    /// cores / the one-thread latency of a prediction, the rate of perfect scaling. The steady
    /// rate counts the results while every session runs (after each one's first result, before
    /// any one's last): opening the sources (ffprobe, the first decoded frame) and the tail where
    /// the first to finish leaves a core idle are left out; the whole run's rate is shown too.
    /// The host's speed drifts by tens of percent within minutes, so each round times the
    /// one-thread predictions right before and after its sessions, and the rounds' ratios are
    /// summed up by their median and interquartile range.
    private func sideBySide(_ yolo: YOLO, url: URL, first: Image) async throws {
        let configured = yolo.configuration
        let cores = ProcessInfo.processInfo.activeProcessorCount
        var shared = configured
        shared.threads = max(1, cores / sources)
        /// The times of `iters` one-thread predictions on the first frame, in ms.
        func oneThread() throws -> [Double] {
            yolo.configuration.threads = 1
            defer { yolo.configuration = configured }
            return try (0..<iters).map { _ in
                let start = DispatchTime.now().uptimeNanoseconds
                _ = try yolo(first)
                return milliseconds(since: start)
            }
        }
        var ratios = [Double]()
        for round in 1...rounds {
            let before = try oneThread()
            let sessions = try (0..<sources).map { _ in try YOLOSession(model: yolo, source: .video(url)) }
            for session in sessions { session.configuration = shared }
            let start = DispatchTime.now().uptimeNanoseconds
            // Each session's result times, in ns, and each result's time in the model (ms).
            let runs = await withTaskGroup(of: ([UInt64], [Double]).self) { group in
                for session in sessions {
                    group.addTask {
                        await session.results.reduce(into: ([], [])) { run, result in
                            run.0.append(DispatchTime.now().uptimeNanoseconds)
                            run.1.append(result.speed.preprocess + result.speed.inference + result.speed.postprocess)
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
            let seconds = milliseconds(since: start) / 1e3
            let latency = Latency(samples: try before + oneThread()).median
            let times = runs.map(\.0), inRun = Latency(samples: runs.flatMap(\.1)).median
            for session in sessions { if let error = session.error { throw error } }
            let frames = times.map(\.count).reduce(0, +)
            guard let from = times.compactMap(\.first).max(), let to = times.compactMap(\.last).min(), to > from else {
                throw ValidationError("the sources gave too few frames to measure a steady rate")
            }
            let steady = Double(times.map { $0.filter { $0 > from && $0 <= to }.count }.reduce(0, +)) / (Double(to - from) / 1e9)
            let ideal = Double(cores) * 1000 / latency
            ratios.append(steady / ideal)
            print(String(format: "round %d: %d sessions side by side: %d frames in %.2f s: %.1f frames/s (whole run, ratio %.3f); "
                         + "while all run: %.1f frames/s; one-thread prediction median %.2f ms, %d cores: %.1f frames/s ideal; "
                         + "ratio %.3f; a prediction in the run: median %.2f ms", round, sources, frames, seconds,
                         Double(frames) / seconds, Double(frames) / seconds / ideal, steady, latency, cores, ideal, steady / ideal, inRun))
        }
        // Quartiles as compare-peers takes them (Python's statistics.quantiles, "inclusive"):
        // interpolated at q · (rounds − 1).
        let sorted = ratios.sorted()
        func quartile(_ q: Double) -> Double {
            let position = q * Double(rounds - 1), low = Int(position)
            return low + 1 < rounds ? sorted[low] + (position - Double(low)) * (sorted[low + 1] - sorted[low]) : sorted[low]
        }
        print(String(format: "%d sources, %d rounds: ratio median %.3f [interquartile %.3f–%.3f]", sources, rounds,
                     Latency(samples: ratios).median, quartile(0.25), quartile(0.75)))
    }
}

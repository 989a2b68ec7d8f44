import ArgumentParser
import Foundation
import Tensor
import YOLOCore
import YOLONet

/// `yolo-bench --model yolo26n`: whole-model latency per thread count, and a per-layer table
/// from instrumented passes alternating with the timed ones, like llama-bench.
struct ModelBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "model", abstract: "Measure whole-model and per-layer latency of a YOLO model.")

    @Option(help: ArgumentHelp("A .safetensors path, or a name looked up as <name>.safetensors in $YOLO_WEIGHTS_DIR, "
        + "Weights/ and the download cache; a built-in architecture (yolo26n, yolo11x, …) without a file runs with random weights."))
    var model: String

    @Option(help: "Timed forward passes per run.")
    var iters = 100

    @Option(help: "Untimed forward passes before each timed series.")
    var warmup = 10

    @Option(help: "The convolutions' arithmetic: \(YOLOPrecision.allCases.map(\.rawValue).joined(separator: ", ")).")
    var precision: YOLOPrecision = .fp32

    @Option(help: "Side of the square input image.")
    var imgsz = 640

    @Option(help: "Thread counts, comma-separated; each is run.")
    var threads = "\(ProcessInfo.processInfo.activeProcessorCount)"

    @Option(help: "Times the whole measurement is repeated.")
    var repetitions = 1

    @Option(help: "Output format: \(OutputFormat.allCases.map(\.rawValue).joined(separator: ", ")).")
    var output: OutputFormat = .md

    @Flag(inversion: .prefixedNo, help: "Time every top-level layer in instrumented passes, one after each timed pass.")
    var perLayer = true

    @Option(help: "Also time this image through YOLOCore's prediction: decoding, preprocessing, inference, postprocessing.")
    var source: String?

    @Flag(help: ArgumentHelp("Run passes on request, for a driver that alternates runtimes (scripts/compare-peers): "
        + "each line \"THREADS PASSES\" read from standard input runs that many passes and prints their milliseconds on one line; "
        + "--threads, --iters, --warmup, --repetitions, --output, --per-layer and --source do not apply."))
    var paced = false

    func validate() throws {
        guard iters >= 1 else { throw ValidationError("--iters must be at least 1, got \(iters)") }
        guard warmup >= 0 else { throw ValidationError("--warmup must not be negative, got \(warmup)") }
        guard repetitions >= 1 else { throw ValidationError("--repetitions must be at least 1, got \(repetitions)") }
        guard imgsz >= 1 else { throw ValidationError("--imgsz must be positive, got \(imgsz)") }
        _ = try parseThreads(threads)
    }

    func run() throws {
        let threadCounts = try parseThreads(threads)
        let bench = try BenchModel(model, precision: precision.graph)
        let network = bench.network
        // Deterministic 8-bit pixels as k/255, like a preprocessed image (Knuth's multiplicative hash).
        let pixels = network.inputChannels * imgsz * imgsz
        let x = Tensor(shape: [1, network.inputChannels, imgsz, imgsz],
                       scalars: (0..<pixels).map { Float(($0 * 2_654_435_761) >> 12 & 255) / 255 })
        try network.validate(input: x)
        if paced { return try runPaced(network, x) }
        let pipeline = try source.map { try Pipeline(source: $0, weights: bench.file, imgsz: imgsz, precision: precision) }
        let flops = network.layerFLOPs(height: imgsz, width: imgsz)
        let peaks = try threadCounts.map { ($0, try sgemmPeak(threads: $0)) }
        let setup = BenchSetup(
            model: bench.name, weights: bench.file ?? "random", precision: precision.rawValue, parameters: network.parameterCount,
            gflop: flops.reduce(0, +) / 1e9, imgsz: imgsz, iters: iters, warmup: warmup, repetitions: repetitions,
            sgemmPeaks: peaks.map { ($0.0, $0.1.gflops) }, blasCore: peaks.first?.1.core ?? "unknown")
        var report = Report(format: output, setup: setup)
        report.begin()
        let ws = Workspace()
        for repetition in 1...repetitions {
            for (t, peak) in setup.sgemmPeaks {
                Parallel.width = t
                let (whole, layers) = try forwardMilliseconds(network, x, in: ws, warmup: warmup, iters: iters,
                                                              perLayer: perLayer)
                report.add(RunRecord(setup: setup, threads: t, sgemmPeak: peak, repetition: repetition,
                                     latency: Latency(samples: whole),
                                     layers: layers.map { layerRecords($0, network, flops: flops, sgemmPeak: peak) },
                                     pipeline: try pipeline?.measure(warmup: warmup, iters: iters)))
            }
        }
        report.end()
    }

    /// `--paced`: passes in the runs a driver asks for, until standard input ends.
    private func runPaced(_ network: Network, _ x: Tensor) throws {
        let ws = Workspace()
        while let line = readLine() {
            let fields = line.split(separator: " ").map { Int($0) }
            guard fields.count == 2, let threads = fields[0], let passes = fields[1], threads >= 1, passes >= 1 else {
                throw BenchError("--paced reads \"THREADS PASSES\", two positive integers, got \"\(line)\"")
            }
            Parallel.width = threads
            let ms = try forwardMilliseconds(network, x, in: ws, warmup: 0, iters: passes, perLayer: false).whole
            FileHandle.standardOutput.write(Data((ms.map { String(format: "%.3f", $0) }.joined(separator: " ") + "\n").utf8))
        }
    }

    /// The per-layer table of one instrumented series: median ms per layer, and its FLOP rate.
    private func layerRecords(_ series: (samples: [[Double]], shapes: [[Int]]), _ network: Network, flops: [Double],
                              sgemmPeak: Double) -> [LayerRecord] {
        let (samples, shapes) = series
        let ms = samples.map { Latency(samples: $0).median }
        let total = ms.reduce(0, +)
        return network.nodes.indices.map { i in
            // A layer a later one does the work of (0 ms, `Network.Node.skipped`) has no rate.
            let gflop = flops[i] / 1e9, gflops = ms[i] > 0 ? gflop / (ms[i] / 1e3) : 0
            return LayerRecord(index: i, name: "model.\(i)", type: network.nodes[i].type, shape: shapes[i], ms: ms[i],
                               percent: 100 * ms[i] / total, gflop: gflop, gflops: gflops,
                               percentOfPeak: 100 * gflops / sgemmPeak)
        }
    }
}

extension YOLOPrecision: ExpressibleByArgument {}

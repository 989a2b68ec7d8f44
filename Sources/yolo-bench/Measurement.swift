import Dispatch
import Foundation
import Tensor
import YOLONet

/// Summary of wall-time samples in milliseconds. The median and p10/p90 are defined as in
/// ../shared/tools/peers.py (mean of the middle pair; sorted[n/10], sorted[9n/10]) so that
/// ratios against the peers compare like with like.
struct Latency: Encodable {
    let median, mean, sd, p10, p90: Double
    let samples: [Double]

    init(samples: [Double]) {
        precondition(!samples.isEmpty, "no samples")
        let sorted = samples.sorted(), n = samples.count
        median = n % 2 == 1 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2
        let mean = samples.reduce(0, +) / Double(n)
        self.mean = mean
        sd = n > 1 ? (samples.reduce(0) { $0 + ($1 - mean) * ($1 - mean) } / Double(n - 1)).squareRoot() : 0
        p10 = sorted[n / 10]
        p90 = sorted[n * 9 / 10]
        self.samples = samples
    }
}

/// Milliseconds between two `DispatchTime` readings (monotonic clock, nanoseconds).
func milliseconds(since start: UInt64, to end: UInt64 = DispatchTime.now().uptimeNanoseconds) -> Double {
    Double(end - start) / 1e6
}

/// Wall times of `iters` uninstrumented forward passes in `ws` (as a session would run them),
/// after `warmup` untimed ones; with `perLayer`, each is followed by an instrumented pass whose
/// layers are timed, as [layer][iteration], with each layer's output shape. The two alternate
/// pass by pass: the machine's speed drifts over seconds, and series run one after the other
/// would compare different stretches of it. Layer i runs from the previous layer's `observe`
/// callback (the call, for layer 0) to its own; the head, which has no callback, from the last
/// callback to the return. x holds pixels as k/255, so its bounds are 0…1, as `YOLO` passes them.
func forwardMilliseconds(_ network: Network, _ x: Tensor, in ws: Workspace, warmup: Int, iters: Int,
                         perLayer: Bool) throws -> (whole: [Double], layers: (samples: [[Double]], shapes: [[Int]])?) {
    let range = ValueRange(lower: 0, upper: 1)
    for _ in 0..<warmup { _ = try network.forward(x, in: ws, inputRange: range) }
    let layers = network.nodes.count
    var whole = [Double](), samples = [[Double]](repeating: [], count: layers)
    var shapes = [[Int]](repeating: [], count: layers)
    for _ in 0..<iters {
        let start = DispatchTime.now().uptimeNanoseconds
        _ = try network.forward(x, in: ws, inputRange: range)
        whole.append(milliseconds(since: start))
        guard perLayer else { continue }
        var last = DispatchTime.now().uptimeNanoseconds
        let result = try network.forward(x, in: ws, inputRange: range) { i, y in
            let now = DispatchTime.now().uptimeNanoseconds
            samples[i].append(milliseconds(since: last, to: now))
            shapes[i] = [1, y.channels, y.height, y.width]
            last = now
        }
        samples[layers - 1].append(milliseconds(since: last))
        shapes[layers - 1] = result.outputShape
        // Layers a later one does the work of (`Network.Node.skipped`) show no output: 0 ms.
        for i in samples.indices where samples[i].count < samples[layers - 1].count { samples[i].append(0) }
    }
    return (whole, perLayer ? (samples, shapes) : nil)
}

/// OpenBLAS's sgemm throughput on a 1024³ product, the ceiling the per-layer GFLOP/s are
/// compared with, and the kernels it runs. Measured by `yolo-bench sgemm` in a child process: a
/// detection model never loads OpenBLAS, which keeps its packing buffers for the life of a
/// process, and the peak RSS reported is the model's.
func sgemmPeak(threads: Int) throws -> (gflops: Double, core: String) {
    let process = Process(), output = Pipe()
    process.executableURL = URL(fileURLWithPath: "/proc/self/exe")
    process.arguments = ["sgemm", "--sizes", "1024x1024x1024", "--threads", "\(threads)", "--iters", "10"]
    process.standardOutput = output
    try process.run()
    let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
    process.waitUntilExit()
    // | M | N | K | threads | OpenBLAS ms | GFLOP/s | yolo-swift ms | GFLOP/s |
    let lines = text.split(separator: "\n"), corePrefix = "OpenBLAS core: "
    guard process.terminationStatus == 0, let row = lines.last(where: { $0.hasPrefix("| 1024 |") }),
          let gflops = Double(row.split(separator: "|")[5].trimmingCharacters(in: .whitespaces)),
          let core = lines.first(where: { $0.hasPrefix(corePrefix) })?.dropFirst(corePrefix.count).prefix(while: { $0 != "," })
    else {
        throw BenchError("the sgemm peak measurement (yolo-bench sgemm in a child process) failed: \(text)")
    }
    return (gflops, String(core))
}

import ArgumentParser
import Foundation
import Tensor
import YOLOCore

/// `yolo-bench conv`: one convolution at a time, on the kernels the models run (phase planes and
/// the GEMM, Winograd, depthwise, SiLU epilogue), into a preallocated output as in a workspace:
/// which shapes are slow, without a model around them. GFLOP/s counts a direct convolution's
/// multiply-adds (Winograd's 3×3 do fewer).
struct ConvBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "conv", abstract: "Measure single convolutions (3×3 and 1×1 YOLO shapes by default).")

    @Option(help: ArgumentHelp("Convolutions as Cin x H x W : Cout : kernel : stride [: groups], comma-separated "
        + "(padding kernel / 2, SiLU)."))
    var shapes = "64x160x160:64:3:2,48x160x160:64:1:1,16x160x160:8:3:1,64x80x80:64:3:1,64x80x80:64:3:1:64"

    @Option(help: "Thread counts, comma-separated.")
    var threads = "1,\(ProcessInfo.processInfo.activeProcessorCount)"

    @Option(help: "The arithmetic: fp32, or int8 (`quantizedConv2d`, ungrouped shapes only).")
    var precision: YOLOPrecision = .fp32

    @Option(help: "Timed repetitions per shape and thread count.")
    var iters = 30

    func validate() throws {
        guard (1...100_000).contains(iters) else { throw ValidationError("--iters must be in 1...100000, got \(iters)") }
        _ = try parseThreads(threads)
        let shapes = try convShapes(shapes)
        if precision == .int8, let grouped = shapes.first(where: { $0.groups > 1 }) {
            throw ValidationError("--precision int8 runs ungrouped convolutions only, got \(grouped.groups) groups")
        }
    }

    func run() throws {
        let threadCounts = try parseThreads(threads)
        print("CPU: \(CPU.modelName) (\(CPU.simdLevel))")
        print("| input | output | kernel | stride | groups | precision | threads | median ms | p10 ms | GFLOP/s |")
        print("|---|---|---:|---:|---:|---|---:|---:|---:|---:|")
        for s in try convShapes(shapes) {
            let p = Conv2DParameters(kernel: s.kernel, stride: s.stride, padding: s.kernel / 2, groups: s.groups)
            let (ho, wo) = p.outputSize(h: s.h, w: s.w)
            let w = Tensor(shape: [s.cout, s.cin / s.groups, s.kernel, s.kernel],
                           scalars: (0..<(s.cout * s.cin / s.groups * s.kernel * s.kernel)).map { Float($0 % 17) / 64 - 0.125 })
            let weight = ConvWeights(w, p), quantized = precision == .int8 ? QuantizedConvWeights(w) : nil
            let bias = [Float](repeating: 0.01, count: s.cout)
            let x = Tensor(shape: [1, s.cin, s.h, s.w], scalars: (0..<(s.cin * s.h * s.w)).map { Float($0 % 251) / 251 })
            var y = [Float](repeating: 0, count: s.cout * ho * wo)
            let flop = 2 * Double(s.cout * ho * wo) * Double(s.cin / s.groups * s.kernel * s.kernel)
            for t in threadCounts {
                Parallel.width = t
                let scratch = Scratch()
                var samples = [Double]()
                x.withMap { xm in
                    y.withUnsafeMutableBufferPointer { yb in
                        let ym = Map(yb.baseAddress!, channels: s.cout, height: ho, width: wo)
                        for i in 0..<(iters + 2) {
                            let start = DispatchTime.now().uptimeNanoseconds
                            if let quantized {
                                quantizedConv2d(xm, weight: quantized, bias: bias, p, activation: .silu, into: ym, scratch: scratch)
                            } else {
                                conv2d(xm, weight: weight, bias: bias, p, activation: .silu, into: ym, scratch: scratch)
                            }
                            if i >= 2 { samples.append(milliseconds(since: start)) }
                        }
                    }
                }
                let latency = Latency(samples: samples)
                print("| \(s.cin)×\(s.h)×\(s.w) | \(s.cout)×\(ho)×\(wo) | \(s.kernel) | \(s.stride) | \(s.groups) "
                      + "| \(precision.rawValue) | \(t) "
                      + "| \(String(format: "%.3f", latency.median)) | \(String(format: "%.3f", latency.p10)) "
                      + "| \(String(format: "%.1f", flop / (latency.median * 1e6))) |")
            }
        }
    }
}

/// `--shapes` of `yolo-bench conv`: "CinxHxW:Cout:kernel:stride[:groups]", comma-separated.
func convShapes(_ list: String) throws
    -> [(cin: Int, h: Int, w: Int, cout: Int, kernel: Int, stride: Int, groups: Int)] {
    try list.split(separator: ",").map { spec in
        let fields = spec.split(separator: ":", omittingEmptySubsequences: false)
        let input = fields.first.map { $0.split(separator: "x").compactMap { Int($0) } } ?? []
        let rest = fields.dropFirst().compactMap { Int($0) }
        guard input.count == 3, rest.count == fields.count - 1, (3...4).contains(rest.count),
              (input + rest).allSatisfy({ $0 > 0 && $0 <= 8192 }) else {
            throw ValidationError("shape '\(spec)' is not CinxHxW:Cout:kernel:stride[:groups] of numbers in 1...8192")
        }
        let (cin, h, w, cout, kernel, stride) = (input[0], input[1], input[2], rest[0], rest[1], rest[2])
        let groups = rest.count == 4 ? rest[3] : 1
        guard cin % groups == 0, cout % groups == 0 else {
            throw ValidationError("shape '\(spec)': Cin (\(cin)) and Cout (\(cout)) must be multiples of the groups (\(groups))")
        }
        guard cin * h * w <= 1 << 26, cout * h * w <= 1 << 26 else {
            throw ValidationError("shape '\(spec)': input and output maps are limited to 2^26 floats each")
        }
        return (cin, h, w, cout, kernel, stride, groups)
    }
}

import ArgumentParser
import Foundation
import Tensor

/// `yolo-bench sgemm`: the GFLOP/s of OpenBLAS's sgemm through the Swift wrapper, per thread
/// count, beside yolo-swift's own GEMM (the one convolutions run on) doing the same product as a
/// 1×1 convolution: weights [M, K], input [K, N], no bias or activation.
struct SGEMMBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sgemm", abstract: "Measure single-precision GEMM throughput (row-major C = A·B).")

    @Option(help: "Problem sizes as MxNxK, comma-separated.")
    var sizes: String = "1024x1024x1024,64x6400x576"

    @Option(help: "Thread counts, comma-separated.")
    var threads: String = "1,\(ProcessInfo.processInfo.activeProcessorCount)"

    @Option(help: "Timed repetitions per size and thread count.")
    var iters: Int = 20

    func validate() throws {
        guard (1...100_000).contains(iters) else { throw ValidationError("--iters must be in 1...100000, got \(iters)") }
    }

    func run() throws {
        let shapes = try sizes.split(separator: ",").map { spec -> (Int, Int, Int) in
            let d = spec.split(separator: "x").compactMap { Int($0) }
            guard d.count == 3, d.allSatisfy({ $0 > 0 && $0 <= 65536 }) else {
                throw ValidationError("size '\(spec)' is not MxNxK with each dimension in 1...65536")
            }
            return (d[0], d[1], d[2])
        }
        let threadCounts = try parseThreads(threads)
        try BLAS.load()
        print("OpenBLAS core: \(BLAS.coreName), CPU: \(CPU.modelName) (\(CPU.simdLevel))")
        print("| M | N | K | threads | OpenBLAS ms | GFLOP/s | yolo-swift ms | GFLOP/s |")
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        for (m, n, k) in shapes {
            for t in threadCounts {
                let flop = 2 * Double(m) * Double(n) * Double(k)
                let blas = medianSGEMMMilliseconds(m: m, n: n, k: k, threads: t, iters: iters)
                let ours = medianConvGEMMMilliseconds(m: m, n: n, k: k, threads: t, iters: iters)
                print("| \(m) | \(n) | \(k) | \(t) | \(String(format: "%.3f", blas)) | \(String(format: "%.1f", flop / (blas * 1e6))) "
                      + "| \(String(format: "%.3f", ours)) | \(String(format: "%.1f", flop / (ours * 1e6))) |")
            }
        }
    }
}

/// Median wall time of `iters` GEMMs after two warm-up runs.
func medianSGEMMMilliseconds(m: Int, n: Int, k: Int, threads: Int, iters: Int) -> Double {
    Parallel.width = threads
    let a = [Float](repeating: 0.5, count: m * k), b = [Float](repeating: 0.25, count: k * n)
    var c = [Float](repeating: 0, count: m * n)
    var samples = [Double]()
    for i in 0..<(iters + 2) {
        let start = DispatchTime.now().uptimeNanoseconds
        a.withUnsafeBufferPointer { ap in
            b.withUnsafeBufferPointer { bp in
                c.withUnsafeMutableBufferPointer { cp in
                    BLAS.sgemm(m: m, n: n, k: k, a: ap.baseAddress!, lda: k, b: bp.baseAddress!, ldb: n,
                               c: cp.baseAddress!, ldc: n)
                }
            }
        }
        if i >= 2 { samples.append(Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6) }
    }
    return samples.sorted()[samples.count / 2]
}

/// Median wall time of `iters` 1×1 convolutions computing the same product into one preallocated
/// output, as the OpenBLAS side writes into one C, after two warm-up runs.
func medianConvGEMMMilliseconds(m: Int, n: Int, k: Int, threads: Int, iters: Int) -> Double {
    Parallel.width = threads
    let p = Conv2DParameters(kernel: 1)
    let weight = ConvWeights(Tensor(shape: [m, k, 1, 1], scalars: [Float](repeating: 0.5, count: m * k)), p)
    let x = Tensor(shape: [1, k, 1, n], scalars: [Float](repeating: 0.25, count: k * n))
    let bias = [Float](repeating: 0, count: m)
    var y = [Float](repeating: 0, count: m * n)
    let scratch = Scratch()
    var samples = [Double]()
    x.withMap { xm in
        y.withUnsafeMutableBufferPointer { yb in
            let ym = Map(yb.baseAddress!, channels: m, height: 1, width: n)
            for i in 0..<(iters + 2) {
                let start = DispatchTime.now().uptimeNanoseconds
                conv2d(xm, weight: weight, bias: bias, p, into: ym, scratch: scratch)
                if i >= 2 { samples.append(milliseconds(since: start)) }
            }
        }
    }
    return samples.sorted()[samples.count / 2]
}

func parseThreads(_ list: String) throws -> [Int] {
    try list.split(separator: ",").map {
        guard let t = Int($0), t >= 1, t <= 1024 else { throw ValidationError("thread count '\($0)' is not a number in 1...1024") }
        return t
    }
}

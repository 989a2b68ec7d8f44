import ArgumentParser
import Foundation
import Tensor

/// `yolo-bench sgemm`: the GFLOP/s of OpenBLAS's sgemm through the Swift wrapper, per thread count.
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
        print("| M | N | K | threads | median ms | GFLOP/s |")
        print("|---:|---:|---:|---:|---:|---:|")
        for (m, n, k) in shapes {
            for t in threadCounts {
                let ms = medianSGEMMMilliseconds(m: m, n: n, k: k, threads: t, iters: iters)
                let gflops = 2 * Double(m) * Double(n) * Double(k) / (ms * 1e6)
                print("| \(m) | \(n) | \(k) | \(t) | \(String(format: "%.3f", ms)) | \(String(format: "%.1f", gflops)) |")
            }
        }
    }
}

/// Median wall time of `iters` GEMMs after two warm-up runs.
func medianSGEMMMilliseconds(m: Int, n: Int, k: Int, threads: Int, iters: Int) -> Double {
    BLAS.threads = threads
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

func parseThreads(_ list: String) throws -> [Int] {
    try list.split(separator: ",").map {
        guard let t = Int($0), t >= 1, t <= 1024 else { throw ValidationError("thread count '\($0)' is not a number in 1...1024") }
        return t
    }
}

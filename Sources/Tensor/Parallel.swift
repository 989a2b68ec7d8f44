import Dispatch
import Synchronization

/// How our kernels split work over threads.
///
/// OpenBLAS runs single-threaded (set when it is loaded); every multi-threaded region is
/// ours, so a GEMM and the im2col / epilogue around it share one split and the cores are
/// never oversubscribed by OpenBLAS threads spinning after a GEMM. `BLAS.threads` reads and
/// writes `Parallel.width`.
public enum Parallel {
    /// 0 until set: then OpenBLAS's own default (all cores, or `OPENBLAS_NUM_THREADS`).
    private static let storage = Atomic<Int>(0)

    /// Threads a kernel may use (≥ 1).
    public static var width: Int {
        get {
            let w = storage.load(ordering: .relaxed)
            return w > 0 ? w : BLAS.defaultThreads
        }
        set { storage.store(max(1, newValue), ordering: .relaxed) }
    }

    /// Runs `body(i)` for every i in 0..<count, concurrently when count > 1; returns when all are done.
    static func forEach(_ count: Int, _ body: @Sendable (Int) -> Void) {
        if count == 1 {
            body(0)
        } else if count > 1 {
            DispatchQueue.concurrentPerform(iterations: count, execute: body)
        }
    }

    /// 0..<total in at most `parts` contiguous ranges, each starting at a multiple of `align`
    /// (the last takes the rest); fewer parts when there is too little work for them.
    static func ranges(_ total: Int, parts: Int, align: Int = 1) -> [Range<Int>] {
        let units = (total + align - 1) / align
        let n = max(1, min(parts, units))
        return (0..<n).map { i in min(total, i * units / n * align)..<min(total, (i + 1) * units / n * align) }
    }
}

/// A buffer address carried into a concurrent region (pointers are not `Sendable`); each
/// task writes only its own part of the buffer.
struct Address: Sendable {
    let bits: Int
    init(_ p: UnsafePointer<Float>) { bits = Int(bitPattern: p) }
    init(_ p: UnsafeMutablePointer<Float>) { bits = Int(bitPattern: p) }
    var pointer: UnsafeMutablePointer<Float> { UnsafeMutablePointer(bitPattern: bits)! }
}

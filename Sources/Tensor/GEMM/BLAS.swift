import Foundation

/// OpenBLAS, loaded at run time (`dlopen`) by the layers that use it: the transposed convolution
/// and `matmul` of the segmentation heads, the classification head's linear layer.
///
/// Why `dlopen` rather than linking: Debian's OpenBLAS (DYNAMIC_ARCH) identifies some AVX-512
/// cores as Haswell (AVX2) and picks its kernels in a load-time constructor; its SKYLAKEX kernels
/// are faster on them (docs/PERFORMANCE.md). Loading the library ourselves lets us set
/// `OPENBLAS_CORETYPE` first, from inside the process, for every user of the package; a process
/// that runs no such layer never loads it. (Re-selecting the kernels after a normal link, through
/// the unexported-in-headers `gotoblas_dynamic_init`, would leave work buffers sized for the old
/// kernels.)
///
/// The choice: `YOLO_BLAS_CORETYPE` if set, else SKYLAKEX on CPUs with AVX-512, else what
/// OpenBLAS decides. An inherited `OPENBLAS_CORETYPE` is overridden on AVX-512 CPUs because
/// images such as this project's CI export `OPENBLAS_CORETYPE=Haswell` globally.
public enum BLAS {
    public struct LoadError: Error, LocalizedError {
        public let message: String
        public var errorDescription: String? { message }
    }

    private typealias SgemmFunction = @convention(c) (
        Int32, Int32, Int32, Int32, Int32, Int32, Float, UnsafePointer<Float>?, Int32,
        UnsafePointer<Float>?, Int32, Float, UnsafeMutablePointer<Float>?, Int32) -> Void

    private struct Library: Sendable {
        let sgemm: SgemmFunction
        let coreName: @convention(c) () -> UnsafePointer<CChar>?
    }

    private static let library: Result<Library, LoadError> = {
        if let forced = ProcessInfo.processInfo.environment["YOLO_BLAS_CORETYPE"] {
            setenv("OPENBLAS_CORETYPE", forced, 1)
        } else if CPU.hasAVX512Skylake {
            setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1)
        }
        // Our kernels split the work (Parallel); OpenBLAS stays on the calling thread. Told so
        // after loading, it would already have started worker threads, which spin on the cores
        // ours need; with OPENBLAS_NUM_THREADS=1 it starts none. The variable is restored after.
        let threadsVariable = getenv("OPENBLAS_NUM_THREADS").map { String(cString: $0) }
        setenv("OPENBLAS_NUM_THREADS", "1", 1)
        defer {
            if let threadsVariable { setenv("OPENBLAS_NUM_THREADS", threadsVariable, 1) } else { unsetenv("OPENBLAS_NUM_THREADS") }
        }
        let names = ["libopenblas.so.0", "libopenblas.so"]
        guard let handle = names.lazy.compactMap({ dlopen($0, RTLD_NOW | RTLD_GLOBAL) }).first else {
            return .failure(LoadError(message: "OpenBLAS could not be loaded (tried \(names.joined(separator: ", ")): "
                + "\(String(cString: dlerror()))); install it with `apt-get install libopenblas-dev`"))
        }
        func symbol<T>(_ name: String, _: T.Type) -> T? {
            dlsym(handle, name).map { unsafeBitCast($0, to: T.self) }
        }
        guard let sgemm = symbol("cblas_sgemm", SgemmFunction.self),
              let coreName = symbol("openblas_get_corename", (@convention(c) () -> UnsafePointer<CChar>?).self)
        else {
            return .failure(LoadError(message: "the loaded OpenBLAS lacks cblas_sgemm or openblas_get_corename"))
        }
        return .success(Library(sgemm: sgemm, coreName: coreName))
    }()

    /// Loads OpenBLAS once per process; throws a readable error if it is not installed. Only
    /// callers of `sgemm` need it (a model whose layers use it loads it when it is built): it adds
    /// to a process's resident memory.
    public static func load() throws {
        _ = try library.get()
    }

    private static var loaded: Library {
        switch library {
        case .success(let lib): return lib
        case .failure(let error): fatalError(error.message)
        }
    }

    /// The kernel set OpenBLAS uses, e.g. "SkylakeX", "Cooperlake" or "Haswell".
    public static var coreName: String {
        loaded.coreName().map { String(cString: $0) } ?? "unknown"
    }

    /// C[M×N] = alpha · op(A) · op(B) + beta · C, row-major, with leading dimensions.
    /// op(A) is M×K (A is stored K×M when `transA`), op(B) is K×N (B is N×K when `transB`).
    /// Above 2¹⁹ multiply-adds the N columns are cut into 4 parts, single-threaded GEMMs that the
    /// threads share. The cut depends on the shape alone, never on the thread count: OpenBLAS's
    /// SkylakeX kernels round a column by how many columns its call has, so a cut by threads gave
    /// other bits at each thread count. 4 parts cost nothing measurable against one call at 1
    /// thread or two at 2 (segmentation's shapes), and keep 4 threads busy.
    public static func sgemm(
        transA: Bool = false, transB: Bool = false,
        m: Int, n: Int, k: Int,
        alpha: Float = 1,
        a: UnsafePointer<Float>, lda: Int,
        b: UnsafePointer<Float>, ldb: Int,
        beta: Float = 0,
        c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        let parts = Parallel.ranges(n, parts: 2 * m * n * k >= 1 << 20 ? 4 : 1, align: 16)
        Parallel.forEach(parts.count, SGEMMColumns(
            a: Address(a), b: Address(b), c: Address(c), parts: parts, transA: transA, transB: transB, m: m, k: k,
            lda: lda, ldb: ldb, ldc: ldc, alpha: alpha, beta: beta))
    }

    /// `sgemm`'s part: a range of C's columns, one single-threaded OpenBLAS call; column j of
    /// op(B) starts at b + j (row-major K×N) or b + j · ldb (N×K, transposed).
    private struct SGEMMColumns: ParallelWork {
        let a: Address<Float>, b: Address<Float>, c: Address<Float>
        let parts: Partition
        let transA: Bool, transB: Bool
        let m: Int, k: Int, lda: Int, ldb: Int, ldc: Int
        let alpha: Float, beta: Float

        func run(part: Int, thread _: Int) {
            let cols = parts[part]
            // CBLAS enum values: CblasRowMajor 101, CblasNoTrans 111, CblasTrans 112.
            loaded.sgemm(101, transA ? 112 : 111, transB ? 112 : 111, Int32(m), Int32(cols.count), Int32(k), alpha,
                         a.pointer, Int32(lda), b.pointer + (transB ? cols.lowerBound * ldb : cols.lowerBound), Int32(ldb),
                         beta, c.pointer + cols.lowerBound, Int32(ldc))
        }
    }
}

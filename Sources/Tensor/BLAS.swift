import COpenBLAS
import Foundation

/// OpenBLAS set-up and the single-precision GEMM every convolution and matmul goes through.
///
/// Debian's OpenBLAS 0.3.21 is built with DYNAMIC_ARCH but identifies AVX-512 Zen cores as
/// Haswell (AVX2). Its SKYLAKEX kernels run on them and measured 172 vs 98 GFLOP/s on one
/// core (ARCHITECTURE.md). The library picks its kernels in a load-time constructor, before
/// any Swift code runs, so `configure()` sets `OPENBLAS_CORETYPE` and asks OpenBLAS to select
/// again. A user's own `OPENBLAS_CORETYPE` is always respected.
public enum BLAS {
    /// Selects the kernel set once per process; every entry point here calls it.
    private static let configured: Void = {
        if ProcessInfo.processInfo.environment["OPENBLAS_CORETYPE"] == nil,
           CPU.hasAVX512Skylake, coreName != "SkylakeX", coreName != "Cooperlake" {
            setenv("OPENBLAS_CORETYPE", "SKYLAKEX", 1)
            gotoblas_dynamic_quit()
            gotoblas_dynamic_init()
        }
    }()

    /// Call before the first GEMM; safe to call any number of times from any thread.
    public static func configure() { _ = configured }

    /// The kernel set OpenBLAS uses, e.g. "SkylakeX" or "Haswell".
    public static var coreName: String {
        String(cString: openblas_get_corename())
    }

    /// Threads OpenBLAS uses inside one GEMM.
    public static var threads: Int {
        get { configure(); return Int(openblas_get_num_threads()) }
        set { configure(); openblas_set_num_threads(Int32(max(1, newValue))) }
    }

    /// C[M×N] = alpha · op(A) · op(B) + beta · C, row-major, with leading dimensions.
    /// op(A) is M×K (A is K×M when `transA`), op(B) is K×N (B is N×K when `transB`).
    @inlinable
    public static func sgemm(
        transA: Bool = false, transB: Bool = false,
        m: Int, n: Int, k: Int,
        alpha: Float = 1,
        a: UnsafePointer<Float>, lda: Int,
        b: UnsafePointer<Float>, ldb: Int,
        beta: Float = 0,
        c: UnsafeMutablePointer<Float>, ldc: Int
    ) {
        configure()
        cblas_sgemm(CblasRowMajor,
                    transA ? CblasTrans : CblasNoTrans,
                    transB ? CblasTrans : CblasNoTrans,
                    blasint(m), blasint(n), blasint(k),
                    alpha, a, blasint(lda), b, blasint(ldb),
                    beta, c, blasint(ldc))
    }
}

/// What the CPU offers, read once from /proc/cpuinfo (Linux).
public enum CPU {
    /// The first processor's model name, e.g. "AMD EPYC 9R45".
    public static let modelName: String = field("model name") ?? "unknown"

    /// The CPU feature flags.
    public static let flags: Set<String> = Set((field("flags") ?? "").split(separator: " ").map(String.init))

    /// AVX-512 F/BW/DQ/VL/CD: what OpenBLAS's SKYLAKEX kernels need.
    public static var hasAVX512Skylake: Bool {
        ["avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"].allSatisfy(flags.contains)
    }

    /// The widest SIMD level, for reports: "AVX-512", "AVX2+FMA", "SSE".
    public static var simdLevel: String {
        if hasAVX512Skylake { return "AVX-512" }
        if flags.contains("avx2") && flags.contains("fma") { return "AVX2+FMA" }
        return "SSE"
    }

    private static func field(_ name: String) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix(name) {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }
}

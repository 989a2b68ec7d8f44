import Foundation

/// What the CPU offers, read once from /proc/cpuinfo (Linux).
public enum CPU {
    /// The first processor's model name, as /proc/cpuinfo gives it.
    public static let modelName: String = field("model name") ?? "unknown"

    /// The CPU feature flags.
    public static let flags: Set<String> = Set((field("flags") ?? "").split(separator: " ").map(String.init))

    /// AVX-512 F/BW/DQ/VL/CD: what OpenBLAS's SKYLAKEX kernels need.
    public static var hasAVX512Skylake: Bool {
        ["avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512cd"].allSatisfy(flags.contains)
    }

    /// The L1 data cache of one core, in bytes (0 where the system does not say).
    public static let l1DataBytes = max(0, sysconf(Int32(_SC_LEVEL1_DCACHE_SIZE)))

    /// The widest SIMD level, for reports: "AVX-512", "AVX2+FMA" or "SSE".
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

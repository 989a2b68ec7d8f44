import CTargetFeatures
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

extension CPU {
    /// A CPU without an x86 feature this build uses: running on, the first instruction of it would
    /// end the process with an illegal instruction.
    public struct MissingFeaturesError: Error, LocalizedError {
        /// The features the build targets that this CPU lacks.
        public let missing: [String]

        package init(missing: [String]) { self.missing = missing }

        public var errorDescription: String? {
            "this build of yolo-swift uses CPU features this processor lacks (\(missing.joined(separator: ", "))): "
                + "it was compiled for another CPU (`-Xswiftc -target-cpu …`); rebuild it on this machine with "
                + "`-Xswiftc -target-cpu -Xswiftc native`"
        }
    }

    /// The x86 features beyond baseline x86-64 this build may use (the compiler's target,
    /// `-Xswiftc -target-cpu …`), as `__builtin_cpu_supports` names them.
    public static let targetFeatures = names(targetedFeatures())

    /// A warning for a build without AVX2 and FMA (no `-target-cpu`, or one older than Haswell):
    /// the SIMD kernels then run on SSE or scalar code; nil for a build that has both.
    public static let slowBuildWarning: String? = targetFeatures.contains("avx2") && targetFeatures.contains("fma") ? nil : """
        WARNING: yolo-swift was built without AVX2 and FMA: inference runs about 50 times slower. \
        Build with `-Xswiftc -target-cpu -Xswiftc native` (or `haswell` for a binary that runs on any AVX2 CPU).
        """

    /// Throws `MissingFeaturesError` on a CPU without every feature this build uses. Executables
    /// call it first thing, before any kernel runs, so that such a CPU gets a message rather than
    /// an illegal instruction. Where the build runs, it is two C calls and a comparison.
    public static func checkTargetFeatures() throws {
        let (targeted, present) = (targetedFeatures(), presentFeatures())
        guard targeted & ~present == 0 else {
            throw MissingFeaturesError(missing: missingFeatures(targeted: targeted, present: present))
        }
    }

    /// Every feature the check knows: bit i of the feature sets is `knownFeatures[i]`.
    package static let knownFeatures = (0..<Int32(TARGET_FEATURE_COUNT)).map { String(cString: targetFeatureName($0)!) }

    /// The names of the features in `targeted` but not in `present`.
    package static func missingFeatures(targeted: UInt64, present: UInt64) -> [String] { names(targeted & ~present) }

    private static func names(_ features: UInt64) -> [String] {
        knownFeatures.indices.filter { features >> UInt64($0) & 1 != 0 }.map { knownFeatures[$0] }
    }
}

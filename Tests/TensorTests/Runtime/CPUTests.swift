import Tensor
import TestSupport
import XCTest

/// The check that the running CPU has the features the build targets.
final class CPUTests: XCTestCase {
    /// The CPU these tests run on runs this build: it passes its own check.
    func testRunningCPUPassesItsBuildsCheck() {
        XCTAssertNoThrow(try CPU.checkTargetFeatures())
    }

    /// The features the build targets agree with the vector width the kernels were compiled for.
    func testTargetFeaturesMatchTheBuild() {
        XCTAssertEqual(CPU.slowBuildWarning == nil, CPU.targetFeatures.contains("avx2") && CPU.targetFeatures.contains("fma"))
        XCTAssertTrue(CPU.slowBuildWarning.map { $0.contains("-target-cpu") && $0.contains("AVX2") } ?? true)
        XCTAssertEqual(CPU.targetFeatures.contains("avx512f"), TileGeometry.target == .avx512)
        XCTAssertTrue(Set(CPU.targetFeatures).isSubset(of: CPU.knownFeatures))
    }

    /// The comparison on made-up feature sets: what is targeted but absent, in the known order.
    func testMissingFeaturesOfFakeSets() {
        func bits(_ names: [String]) -> UInt64 {
            names.reduce(0) { $0 | 1 << UInt64(CPU.knownFeatures.firstIndex(of: $1)!) }
        }
        let avx512 = bits(["avx", "avx2", "fma", "avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni"])
        let avx2 = bits(["sse3", "ssse3", "sse4.1", "sse4.2", "avx", "avx2", "fma", "bmi2"])
        XCTAssertEqual(CPU.missingFeatures(targeted: avx512, present: avx2),
                       ["avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512vnni"])
        XCTAssertEqual(CPU.missingFeatures(targeted: avx2, present: avx512), ["sse3", "ssse3", "sse4.1", "sse4.2", "bmi2"])
        XCTAssertEqual(CPU.missingFeatures(targeted: avx2, present: avx2 | avx512), [])
        XCTAssertEqual(CPU.missingFeatures(targeted: 0, present: 0), [], "a baseline build runs anywhere")
        XCTAssertEqual(CPU.missingFeatures(targeted: avx2, present: 0).count, 8)
        let message = CPU.MissingFeaturesError(missing: ["avx512f", "avx512bw"]).localizedDescription
        XCTAssertTrue(message.contains("avx512f, avx512bw") && message.contains("-target-cpu"), message)
    }
}

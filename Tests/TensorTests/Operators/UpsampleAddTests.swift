import Tensor
import TestSupport
import XCTest

final class UpsampleAddTests: XCTestCase {
    /// Factors 1 to 16 (YOLOv9e's CBFuse), rows with and without a vector tail, 1 and 2 threads:
    /// one float addition per element, so exact; with SiLU after it (a split 1×1 convolution's),
    /// within the vector SiLU's error.
    func testAddUpsampledNearest() {
        var seed: UInt64 = 30
        let saved = Parallel.width
        defer { Parallel.width = saved }
        for threads in [1, 2] {
            Parallel.width = threads
            for (channels, h, w) in [(1, 1, 1), (3, 5, 7), (8, 10, 20)] {
                for scale in [1, 2, 3, 4, 8, 16] {
                    let x = randomTensor([2, channels, h, w], seed: seed)
                    let y = randomTensor([2, channels, h * scale, w * scale], seed: seed + 1000)
                    seed += 1
                    let sum = Reference.add(y, Reference.upsampleNearest(x, scale: scale))
                    assertClose(addUpsampledNearest(x, scale: scale, to: y), sum, tolerance: 0,
                                "c\(channels) \(h)×\(w) ×\(scale), \(threads) threads")
                    assertClose(addUpsampledNearest(x, scale: scale, to: y, activation: .silu), Reference.activated(sum, .silu),
                                tolerance: 1e-6, "SiLU, c\(channels) \(h)×\(w) ×\(scale), \(threads) threads")
                }
            }
        }
    }
}

import Tensor
import TestSupport
import XCTest

final class AveragePoolTests: XCTestCase {
    /// Rows shorter and longer than a vector, with and without a tail; kernels 1–3; on 1 and 2
    /// threads. Summed in PyTorch's order, within one rounding of the exact mean.
    func testAvgPool() {
        var seed: UInt64 = 1
        let saved = Parallel.width
        defer { Parallel.width = saved }
        for threads in [1, 2] {
            Parallel.width = threads
            for (channels, h, w) in [(1, 1, 1), (3, 7, 13), (5, 17, 16), (2, 40, 81), (16, 64, 64)] {
                for kernel in 1...3 where h >= kernel && w >= kernel {
                    let x = randomTensor([2, channels, h, w], seed: seed)
                    seed += 1
                    assertClose(avgPool2d(x, kernel: kernel), Reference.avgPool2d(x, kernel: kernel), tolerance: 1e-6,
                                "avgpool c\(channels) \(h)×\(w) k\(kernel), \(threads) threads")
                }
            }
        }
    }
}

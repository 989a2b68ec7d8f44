import Tensor
import TestSupport
import XCTest

final class PoolingTests: XCTestCase {
    func testMaxPool() {
        var seed: UInt64 = 1
        for channels in [1, 3, 7, 13] {
            for size in [1, 7, 13, 34, 127] {
                for (kernel, stride, padding) in [(5, 1, 2), (3, 1, 1), (2, 2, 0), (3, 2, 1), (1, 1, 0), (5, 2, 2)]
                where size + 2 * padding >= kernel {
                    let x = randomTensor([1, channels, size, size == 127 ? 31 : size], seed: seed)
                    seed += 1
                    assertClose(maxPool2d(x, kernel: kernel, stride: stride, padding: padding),
                                Reference.maxPool2d(x, kernel: kernel, stride: stride, padding: padding), tolerance: 0,
                                "maxpool c\(channels) \(size) k\(kernel) s\(stride) p\(padding)")
                }
            }
        }
        let x = randomTensor([2, 3, 13, 7], seed: 99)
        assertClose(maxPool2d(x, kernel: 5, stride: 1, padding: 2), Reference.maxPool2d(x, kernel: 5, stride: 1, padding: 2),
                    tolerance: 0, "maxpool batch 2")
    }
}

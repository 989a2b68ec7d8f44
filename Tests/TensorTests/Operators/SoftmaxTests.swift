import Tensor
import TestSupport
import XCTest

final class SoftmaxTests: XCTestCase {
    func testSoftmax() {
        for len in [1, 7, 13, 16, 127] {
            let x = randomTensor([3, len], seed: UInt64(len), range: -30...30)
            assertClose(softmax(x), Reference.softmax(x), tolerance: 1e-6, "softmax rows of \(len)")
        }
        // Along other axes: 16 columns at a time, with odd tails (the DFL softmax is [4, 16, A] along 1).
        let x = randomTensor([3, 13, 37], seed: 31, range: -30...30)
        for axis in 0..<2 {
            assertClose(softmax(x, axis: axis), Reference.softmax(x, axis: axis), tolerance: 1e-6, "softmax along axis \(axis)")
        }
    }
}

import Tensor
import TestSupport
import XCTest

final class UpsampleTests: XCTestCase {
    func testUpsample() {
        for (shape, scale) in [([1, 1, 1, 1], 2), ([1, 3, 7, 13], 2), ([1, 5, 3, 40], 2), ([2, 13, 13, 7], 2), ([1, 7, 1, 127], 3), ([1, 3, 7, 7], 1)] {
            let x = randomTensor(shape, seed: UInt64(shape.reduce(0, +)))
            assertClose(upsampleNearest(x, scale: scale), Reference.upsampleNearest(x, scale: scale), tolerance: 0,
                        "upsample \(shape) ×\(scale)")
        }
    }
}

import Tensor
import TestSupport
import XCTest

final class TensorTypeTests: XCTestCase {
    func testReshapeAndIndexing() {
        let x = randomTensor([2, 3, 7, 13], seed: 77)
        let r = x.reshaped([6, 91])
        XCTAssertEqual(r.shape, [6, 91])
        XCTAssertEqual(r.scalars, x.scalars)
        XCTAssertEqual(x.strides, [273, 91, 13, 1])
        XCTAssertEqual(x[1, 2, 6, 12], x.scalars.last!)
    }
}

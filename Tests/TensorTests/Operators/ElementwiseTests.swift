import Tensor
import TestSupport
import XCTest

final class ElementwiseTests: XCTestCase {
    func testElementwise() {
        for count in [1, 7, 13, 16, 127, 1000, 40_009] {  // the last one split over threads
            let x = randomTensor([count], seed: UInt64(count), range: -20...20)
            let y = randomTensor([count], seed: UInt64(count) + 1)
            assertClose(add(x, y), Reference.add(x, y), tolerance: 0, "add \(count)")
            for activation in [Activation.silu, .sigmoid, .none, .relu, .leakyReLU] {
                let fast = activated(x, activation), plain = Reference.activated(x, activation)
                // A few ULP relative to the value.
                let worst = zip(fast.scalars, plain.scalars).map { abs($0 - $1) / max(abs($1), 1e-30) }.max()!
                XCTAssertLessThan(worst, 4e-7, "\(activation) over \(count) values: relative error \(worst)")
            }
        }
    }

    func testActivationExtremes() {
        let x = Tensor(shape: [8], scalars: [-1000, -100, -88, -1e-8, 0, 1e-8, 88, 1000])
        let s = activated(x, .sigmoid).scalars, silu = activated(x, .silu).scalars
        XCTAssertEqual(s[4], 0.5)
        XCTAssertEqual(s[7], 1)
        XCTAssertLessThan(s[0], 1e-37)
        XCTAssertEqual(silu[4], 0)
        XCTAssertEqual(silu[7], 1000)
        XCTAssertLessThanOrEqual(abs(silu[0]), 1e-34)
        XCTAssertTrue(s.allSatisfy(\.isFinite) && silu.allSatisfy(\.isFinite))
    }
}

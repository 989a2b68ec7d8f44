import Tensor
import TestSupport
import XCTest

final class VectorMathTests: XCTestCase {
    func testExpULP() {
        // A sweep of [-87, 88] (the clamp's range), in ULPs of the correctly rounded result:
        // at most 1.5 within ±20 and 5 at the ends, where ln2 held in one float costs the most.
        var worst = (inner: 0.0, outer: 0.0)
        for i in 0..<200_000 {
            let x = Float(-87 + 175 * Double(i) / 199_999)
            let y = Double(exp(Vec8(repeating: x))[0]), expected = Foundation.exp(Double(x))
            let ulps = abs(y - expected) / Double(Float(expected).ulp)
            if abs(x) <= 20 { worst.inner = max(worst.inner, ulps) } else { worst.outer = max(worst.outer, ulps) }
        }
        XCTAssertLessThan(worst.inner, 1.5, "exp within ±20")
        XCTAssertLessThan(worst.outer, 5, "exp beyond ±20")
    }

    func testCoarseExpRelativeError() {
        // The same sweep: within the polynomial's 1.23e-4 and float rounding.
        var worst = 0.0
        for i in 0..<200_000 {
            let x = Float(-87 + 175 * Double(i) / 199_999)
            let y = Double(exp(Vec8(repeating: x), coarse: true)[0]), expected = Foundation.exp(Double(x))
            worst = max(worst, abs(y / expected - 1))
        }
        XCTAssertLessThan(worst, 1.25e-4)
        XCTAssertGreaterThan(worst, 1e-4, "the coarse polynomial, not the precise one")
    }

    func testNegatedExpIsExpOfTheNegation() {
        // Bit for bit, precise and coarse, across and beyond the clamp's range.
        for i in 0..<400_000 {
            let x = Vec16((0..<16).map { Float(-200 + 400 * Double(i * 16 + $0) / 6_399_999) })
            for coarse in [false, true] {
                let a = unsafeBitCast(exp(x, coarse: coarse, negated: true), to: SIMD16<UInt32>.self)
                let b = unsafeBitCast(exp(-x, coarse: coarse), to: SIMD16<UInt32>.self)
                XCTAssertEqual(a, b, "exp(-x) at \(x[0]), coarse \(coarse)")
                if a != b { return }
            }
        }
    }
}

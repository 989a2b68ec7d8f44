import Tensor
import TestSupport
import XCTest

final class MatMulTests: XCTestCase {
    func testMatmul() {
        var seed: UInt64 = 5
        for (m, k, n) in [(1, 1, 1), (7, 13, 3), (13, 127, 7), (32, 400, 32)] {
            for (ta, tb) in [(false, false), (true, false), (false, true), (true, true)] {
                let a = randomTensor(ta ? [2, k, m] : [2, m, k], seed: seed)
                let b = randomTensor(tb ? [2, n, k] : [2, k, n], seed: seed + 1)
                seed += 2
                let alpha: Float = ta ? 0.25 : 1
                assertClose(matmul(a, b, transposeA: ta, transposeB: tb, alpha: alpha),
                            Reference.matmul(a, b, transposeA: ta, transposeB: tb, alpha: alpha),
                            tolerance: tolerance(reduction: k), "matmul \(m)×\(k)×\(n) tA \(ta) tB \(tb)")
            }
        }
    }
}

import Tensor
import TestSupport
import XCTest

final class AttentionTests: XCTestCase {
    /// Odd position counts (column tails of the softmax and the GEMMs), 1–3 heads, and
    /// YOLO26n's C2PSA shape; on 1 and 2 threads (whole query columns per thread).
    func testAttention() {
        var seed: UInt64 = 70
        for (heads, keyDim, headDim, n) in [(1, 1, 1, 1), (2, 3, 5, 7), (3, 8, 13, 13), (1, 4, 9, 127), (2, 32, 64, 400)] {
            let qkv = randomTensor([heads, 2 * keyDim + headDim, n], seed: seed, range: -2...2)
            seed += 1
            let scale = 1 / Float(keyDim).squareRoot()
            let expected = Reference.attention(qkv, keyDim: keyDim, headDim: headDim, scale: scale)
            for threads in [1, 2] {
                let saved = Parallel.width
                Parallel.width = threads
                defer { Parallel.width = saved }
                assertClose(attention(qkv, keyDim: keyDim, headDim: headDim, scale: scale), expected,
                            tolerance: tolerance(reduction: max(n, keyDim)),
                            "attention heads \(heads) keyDim \(keyDim) headDim \(headDim) N \(n), \(threads) threads")
            }
        }
    }
}

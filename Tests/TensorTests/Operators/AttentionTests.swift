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

    /// Areas (YOLO12's AAttn): each run of N / areas positions attends only within itself, with
    /// runs shorter than a GEMM panel and tails; YOLO12n's P4 shape (2 heads of 32, 4 areas).
    func testAttentionInAreas() {
        var seed: UInt64 = 90
        for (heads, dim, n, areas) in [(1, 3, 8, 2), (2, 5, 28, 4), (1, 8, 130, 2), (2, 32, 400, 4)] {
            let qkv = randomTensor([heads, 3 * dim, n], seed: seed, range: -2...2)
            seed += 1
            let scale = 1 / Float(dim).squareRoot()
            let expected = Reference.attention(qkv, keyDim: dim, headDim: dim, scale: scale, areas: areas)
            for threads in [1, 2] {
                let saved = Parallel.width
                Parallel.width = threads
                defer { Parallel.width = saved }
                assertClose(attention(qkv, keyDim: dim, headDim: dim, scale: scale, areas: areas), expected,
                            tolerance: tolerance(reduction: max(n / areas, dim)),
                            "attention heads \(heads) dim \(dim) N \(n) in \(areas) areas, \(threads) threads")
            }
        }
    }
}

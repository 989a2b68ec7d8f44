import Tensor
import XCTest

final class TensorOpsTests: XCTestCase {
    func testMaxPool() {
        var seed: UInt64 = 1
        for channels in [1, 3, 7, 13] {
            for size in [1, 7, 13, 127] {
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

    func testUpsample() {
        for (shape, scale) in [([1, 1, 1, 1], 2), ([1, 3, 7, 13], 2), ([1, 5, 3, 40], 2), ([2, 13, 13, 7], 2), ([1, 7, 1, 127], 3), ([1, 3, 7, 7], 1)] {
            let x = randomTensor(shape, seed: UInt64(shape.reduce(0, +)))
            assertClose(upsampleNearest(x, scale: scale), Reference.upsampleNearest(x, scale: scale), tolerance: 0,
                        "upsample \(shape) ×\(scale)")
        }
    }

    /// Channel ranges of a map are contiguous views; `write(to:)` copies (split over the threads
    /// at 1 << 15 floats and more), as the graph fills a concatenation.
    func testMapChannelsAndWrite() throws {
        try BLAS.load()
        let saved = BLAS.threads
        defer { BLAS.threads = saved }
        for (channels, h, w) in [(3, 7, 13), (13, 127, 130)] {
            let x = randomTensor([1, channels, h, w], seed: UInt64(channels))
            var y = Tensor(zeros: [1, channels + 2, h, w])
            for threads in [1, 2] {
                BLAS.threads = threads
                y.scalars.withUnsafeMutableBufferPointer { yb in
                    let whole = Map(yb.baseAddress!, channels: channels + 2, height: h, width: w)
                    x.withMap { $0.write(to: whole.channels(1..<(channels + 1))) }
                }
                XCTAssertEqual(Array(y.scalars[(h * w)..<((channels + 1) * h * w)]), x.scalars, "\(channels)×\(h)×\(w), \(threads) threads")
                XCTAssertTrue(y.scalars[..<(h * w)].allSatisfy { $0 == 0 } && y.scalars[((channels + 1) * h * w)...].allSatisfy { $0 == 0 })
            }
        }
    }

    func testElementwise() {
        for count in [1, 7, 13, 16, 127, 1000, 40_009] {  // the last one split over threads
            let x = randomTensor([count], seed: UInt64(count), range: -20...20)
            let y = randomTensor([count], seed: UInt64(count) + 1)
            assertClose(add(x, y), Reference.add(x, y), tolerance: 0, "add \(count)")
            for activation in [Activation.silu, .sigmoid, .none] {
                let fast = activated(x, activation), plain = Reference.activated(x, activation)
                // A few ULP relative to the value.
                let worst = zip(fast.scalars, plain.scalars).map { abs($0 - $1) / max(abs($1), 1e-30) }.max()!
                XCTAssertLessThan(worst, 4e-7, "\(activation) over \(count) values: relative error \(worst)")
            }
        }
    }

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

    func testColumnMaxima() {
        // The last cases span several blocks of columns (split over the threads); values from a
        // set of four tie often.
        for (rows, columns, values) in [(1, 1, 0), (3, 17, 0), (80, 127, 0), (7, 16, 0), (5, 2100, 0), (9, 1041, 4),
                                        (80, 8400, 0)] {
            var g = SystemRandomNumberGenerator()
            let x = (0..<(rows * columns)).map { _ in
                values > 0 ? Float(Int.random(in: 0..<values, using: &g)) : Float.random(in: 0...1, using: &g)
            }
            var best = [Float](repeating: 0, count: columns), idx = [Int32](repeating: 0, count: columns)
            columnMaxima(x, rows: rows, columns: columns, &best, &idx)
            for j in 0..<columns {
                let column = (0..<rows).map { x[$0 * columns + j] }
                XCTAssertEqual(best[j], column.max()!, "\(rows)×\(columns): column \(j)")
                XCTAssertEqual(Int(idx[j]), column.firstIndex(of: column.max()!)!, "\(rows)×\(columns): column \(j)")
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
                let saved = BLAS.threads
                BLAS.threads = threads
                defer { BLAS.threads = saved }
                assertClose(attention(qkv, keyDim: keyDim, headDim: headDim, scale: scale), expected,
                            tolerance: tolerance(reduction: max(n, keyDim)),
                            "attention heads \(heads) keyDim \(keyDim) headDim \(headDim) N \(n), \(threads) threads")
            }
        }
    }

    func testReshapeAndIndexing() {
        let x = randomTensor([2, 3, 7, 13], seed: 77)
        let r = x.reshaped([6, 91])
        XCTAssertEqual(r.shape, [6, 91])
        XCTAssertEqual(r.scalars, x.scalars)
        XCTAssertEqual(x.strides, [273, 91, 13, 1])
        XCTAssertEqual(x[1, 2, 6, 12], x.scalars.last!)
    }
}

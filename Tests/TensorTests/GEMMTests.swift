import Tensor
import XCTest

/// `packedGEMM` and the Winograd convolution on it with both tile geometries (the one this build
/// does not target runs slowly but exactly), against plain loops: odd shapes, reductions longer
/// than one pass over a strip, output columns read from B in runs narrower than B's rows, bias,
/// activation, residual.
final class GEMMTests: XCTestCase {
    private func check(m: Int, k: Int, n: Int, runs: (length: Int, stride: Int)?, activation: Activation,
                       residual: Bool, inPlace: Bool = false, tiles: TileGeometry, seed: UInt64,
                       file: StaticString = #filePath, line: UInt = #line) {
        let (length, stride) = runs ?? (n, n)
        // B's rows hold every run of the n columns, then the slack the GEMM may read past them.
        let ldb = (n + length - 1) / length * stride + gemmReadSlack
        let a = randomTensor([m, k, 1, 1], seed: seed), b = randomTensor([k, ldb], seed: seed &+ 1)
        let bias = randomTensor([m], seed: seed &+ 2).scalars
        let res = residual ? randomTensor([m, n], seed: seed &+ 3).scalars : []
        let rows = (0..<k).map { $0 * ldb }
        var c = [Float](repeating: .nan, count: m * n)
        var scratch = [Float](repeating: .nan, count: gemmScratch(m: m))
        // A as the micro-kernel reads it, [⌈m/8⌉][k][8] zero-padded, packed here: ConvWeights keeps
        // a one-into-one-channel weight unpacked (depthwise), and the tiles read 8 rows a step.
        var panels = [Float](repeating: 0, count: (m + 7) / 8 * k * 8)
        for r in 0..<m { for i in 0..<k { panels[r / 8 * k * 8 + i * 8 + r % 8] = a.scalars[r * k + i] } }
        panels.withUnsafeBufferPointer { pa in
            b.scalars.withUnsafeBufferPointer { pb in
                rows.withUnsafeBufferPointer { offsets in
                    bias.withUnsafeBufferPointer { pbias in
                        res.withUnsafeBufferPointer { pres in
                            c.withUnsafeMutableBufferPointer { pc in
                                packedGEMM(pa.baseAddress!, m: m, k: k, b: pb.baseAddress!, rows: offsets.baseAddress!, n: n,
                                           runs: runs, c: pc.baseAddress!, ldc: n,
                                           Epilogue(bias: pbias.baseAddress!, activation: activation,
                                                    residual: residual ? pres.baseAddress! : nil),
                                           scratch: &scratch, inPlace: inPlace, tiles: tiles)
                            }
                        }
                    }
                }
            }
        }
        var expected = [Float](repeating: 0, count: m * n)
        for r in 0..<m {
            for j in 0..<n {
                let column = j / length * stride + j % length
                var sum = Double(bias[r])
                for i in 0..<k { sum += Double(a.scalars[r * k + i]) * Double(b.scalars[i * ldb + column]) }
                expected[r * n + j] = Reference.activate(sum, activation) + (residual ? res[r * n + j] : 0)
            }
        }
        assertClose(Tensor(shape: [m, n], scalars: c), Tensor(shape: [m, n], scalars: expected),
                    tolerance: tolerance(reduction: k),
                    "GEMM \(tiles) m \(m) k \(k) n \(n) runs \(String(describing: runs)) \(activation) residual \(residual) "
                    + "in place \(inPlace)",
                    file: file, line: line)
    }

    func testWinogradBothTileGeometries() {
        var seed: UInt64 = 700
        for tiles in TileGeometry.allCases {
            // (cin, cout, h, w; Winograd's layout needs cin ≥ 32, 16 on AVX-512): one and several reduction passes, tile groups cut by odd widths and
            // whole ones, strips wider than a grid row, several blocks of tile rows on 2 threads, blocks ending in a
            // narrow strip (20×20 and 14×14: 55 and 28 grid columns a block).
            for (cin, cout, h, w) in [(32, 13, 13, 37), (131, 9, 7, 16), (35, 17, 66, 2), (48, 8, 40, 50), (64, 24, 20, 20),
                                      (100, 9, 14, 14)] {
                let p = Conv2DParameters(kernel: 3, stride: 1, padding: 1)
                let x = randomTensor([1, cin, h, w], seed: seed), weight = randomTensor([cout, cin, 3, 3], seed: seed &+ 1)
                let bias = randomTensor([cout], seed: seed &+ 2).scalars, res = randomTensor([1, cout, h, w], seed: seed &+ 3)
                seed += 4
                var y = [Float](repeating: .nan, count: cout * h * w)
                ConvWeights(weight, p).values.withUnsafeBufferPointer { pw in
                    x.scalars.withUnsafeBufferPointer { px in
                        bias.withUnsafeBufferPointer { pb in
                            res.scalars.withUnsafeBufferPointer { pr in
                                y.withUnsafeMutableBufferPointer { py in
                                    winogradConv2d(px.baseAddress!, channels: cin, h: h, w: w, weight: pw.baseAddress!,
                                                   outputs: cout, py.baseAddress!, bias: pb.baseAddress!, activation: .silu,
                                                   residual: pr.baseAddress!, threads: 2, scratch: Scratch(), tiles: tiles)
                                }
                            }
                        }
                    }
                }
                let expected = Reference.add(res, Reference.conv2d(x, weight: weight, bias: bias, p, activation: .silu))
                assertClose(Tensor(shape: [1, cout, h, w], scalars: y), expected, tolerance: tolerance(reduction: cin * 9),
                            "Winograd \(tiles) cin \(cin) cout \(cout) \(h)×\(w)")
            }
        }
    }

    /// Stride-2 3×3 convolutions on 2×2 output tiles (`stride2TilesConv2d`, one group, 64 or more
    /// output channels): reductions of one and several passes (Cin 50, 130), rows narrower than
    /// 32 floats, of 32 and 40 (8 tiles a vector), of 66, 127, 130 and 257 (16 a vector), odd and
    /// even output sizes (a last tile of one output row or column), strips across tile rows and
    /// ending in narrow strips; output channels filling no whole register tile; residual.
    func testStride2TilesBothTileGeometries() {
        var seed: UInt64 = 800
        for tiles in TileGeometry.allCases {
            for (cin, cout, h, w) in [(50, 64, 13, 127), (5, 65, 34, 66), (19, 72, 7, 32), (16, 64, 20, 80), (3, 80, 9, 31),
                                      (130, 67, 11, 40), (8, 96, 2, 9), (4, 64, 17, 130), (6, 64, 4, 257)] {
                let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
                let (ho, wo) = p.outputSize(h: h, w: w)
                let x = randomTensor([1, cin, h, w], seed: seed), weight = randomTensor([cout, cin, 3, 3], seed: seed &+ 1)
                let bias = randomTensor([cout], seed: seed &+ 2).scalars, res = randomTensor([1, cout, ho, wo], seed: seed &+ 3)
                seed += 4
                let weights = ConvWeights(weight, p)
                XCTAssertEqual(weights.algorithm, .stride2Tiles3x3)
                var y = [Float](repeating: .nan, count: cout * ho * wo)
                y.withUnsafeMutableBufferPointer { py in
                    x.withMap { xm in
                        res.withMap { rm in
                            conv2d(xm, weight: weights, bias: bias, p, activation: .silu, residual: rm,
                                   into: Map(py.baseAddress!, channels: cout, height: ho, width: wo), scratch: Scratch(),
                                   tiles: tiles)
                        }
                    }
                }
                let expected = Reference.add(res, Reference.conv2d(x, weight: weight, bias: bias, p, activation: .silu))
                assertClose(Tensor(shape: [1, cout, ho, wo], scalars: y), expected, tolerance: tolerance(reduction: cin * 9),
                            "stride 2 \(tiles) cin \(cin) cout \(cout) \(h)×\(w)")
            }
        }
    }

    func testBothTileGeometries() {
        var seed: UInt64 = 500
        for tiles in TileGeometry.allCases {
            for m in [1, 4, 7, 13] {
                for k in [1, 7, 127, 300, 700] {
                    for n in [1, 7, 24, 50, 127] {
                        check(m: m, k: k, n: n, runs: nil, activation: .none, residual: false, tiles: tiles, seed: seed)
                        seed += 4
                    }
                }
            }
            for (n, runs) in [(49, (7, 9)), (130, (13, 15)), (100, (5, 20)), (160, (80, 82)), (127, (127, 129))] {
                for (activation, residual) in [(Activation.none, false), (.silu, true), (.sigmoid, false)] {
                    check(m: 13, k: 300, n: n, runs: runs, activation: activation, residual: residual, tiles: tiles, seed: seed)
                    seed += 4
                }
                // B in place: short reductions and ones longer than a panel (in passes).
                for k in [7, 85, 300] {
                    check(m: 21, k: k, n: n, runs: runs, activation: .silu, residual: true, inPlace: true, tiles: tiles, seed: seed)
                    seed += 4
                }
            }
        }
    }
}

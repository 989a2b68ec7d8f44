import Tensor
import TestSupport
import XCTest

/// `packedGEMM` with both tile geometries (the one this build does not target runs slowly but
/// exactly), against plain loops: odd shapes, reductions longer
/// than one pass over a strip, output columns read from B in runs narrower than B's rows, bias,
/// activation, residual.
final class GEMMTests: XCTestCase {
    private func check(m: Int, k: Int, n: Int, runs: (length: Int, stride: Int)?, activation: Activation,
                       residual: Bool, inPlace: Bool = false, blocks: GEMMBlocks? = nil, tiles: TileGeometry, seed: UInt64,
                       file: StaticString = #filePath, line: UInt = #line) {
        let (length, stride) = runs ?? (n, n)
        // B's rows hold every run of the n columns, then the slack the GEMM may read past them.
        let ldb = (n + length - 1) / length * stride + gemmReadSlack
        let a = randomTensor([m, k, 1, 1], seed: seed), b = randomTensor([k, ldb], seed: seed &+ 1)
        let bias = randomTensor([m], seed: seed &+ 2).scalars
        let res = residual ? randomTensor([m, n], seed: seed &+ 3).scalars : []
        let rows = (0..<k).map { $0 * ldb }
        var c = [Float](repeating: .nan, count: m * n)
        var scratch = [Float](repeating: .nan, count: gemmScratch(m: m, blocks: blocks))
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
                                           scratch: &scratch, inPlace: inPlace, blocks: blocks, tiles: tiles)
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
                    + "in place \(inPlace) blocks \(String(describing: blocks))",
                    file: file, line: line)
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
            // The last columns a narrow tile exactly, or more on a padded wide one (n 32, 40 and 64 end
            // on 8, 16 and 16 columns past the 24-wide tiles, 32, 40 and 16 past the 48-wide ones).
            for n in [32, 40, 64] {
                check(m: 13, k: 300, n: n, runs: nil, activation: .silu, residual: true, tiles: tiles, seed: seed)
                seed += 4
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

    /// In blocks (as for weights beyond L2), here small ones: several groups of columns, reduction
    /// blocks that split a panel's depth or end mid-panel, row blocks that end mid-tile.
    func testBlocks() {
        var seed: UInt64 = 900
        for tiles in TileGeometry.allCases {
            for blocks in [GEMMBlocks(k: 50, m: 8, n: 48), GEMMBlocks(k: 300, m: 16, n: 96), GEMMBlocks(k: 1000, m: 128, n: 480)] {
                for (m, k, n, runs) in [(13, 301, 130, nil), (21, 700, 127, nil), (9, 85, 49, (7, 9)), (21, 300, 160, (80, 82)),
                                        (13, 127, 100, (5, 20))] as [(Int, Int, Int, (Int, Int)?)] {
                    for inPlace in [false, true] {
                        check(m: m, k: k, n: n, runs: runs, activation: .silu, residual: true, inPlace: inPlace, blocks: blocks,
                              tiles: tiles, seed: seed)
                        seed += 4
                    }
                    check(m: m, k: k, n: n, runs: runs, activation: .none, residual: false, blocks: blocks, tiles: tiles,
                          seed: seed)
                    seed += 4
                }
            }
        }
    }
}

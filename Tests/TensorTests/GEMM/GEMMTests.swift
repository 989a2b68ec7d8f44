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

    /// `columnTiles` (A's rows in vector lanes, for strips of at most 8 columns) against plain
    /// loops: row counts of one, two and three panels and more, ending mid-panel; 1 to 8 columns;
    /// reductions in one pass and in two (the second adding to the first's sums in C). C's rows
    /// past the product and its columns past the last group of 4 stay untouched.
    func testColumnTiles() {
        var seed: UInt64 = 900
        for (m, k, count, split) in [(5, 7, 1, 0), (8, 33, 4, 0), (13, 20, 3, 9), (24, 50, 8, 25), (29, 41, 6, 1),
                                     (70, 64, 5, 40), (17, 3, 8, 2), (16, 1, 2, 0)] {
            let (ldb, ldc) = (8, 11)
            let a = randomTensor([m, k], seed: seed), b = randomTensor([k, ldb], seed: seed &+ 1)
            seed += 2
            var panels = [Float](repeating: 0, count: (m + 7) / 8 * k * 8)
            for r in 0..<m { for i in 0..<k { panels[r / 8 * k * 8 + i * 8 + r % 8] = a.scalars[r * k + i] } }
            var c = [Float](repeating: .nan, count: (m + 8) * ldc)
            panels.withUnsafeBufferPointer { pa in
                b.scalars.withUnsafeBufferPointer { pb in
                    c.withUnsafeMutableBufferPointer { pc in
                        for steps in [0..<split, split..<k] where !steps.isEmpty {
                            columnTiles(rows: m, count: count, steps: steps, k: k, a: pa.baseAddress!,
                                        b: pb.baseAddress! + steps.lowerBound * ldb, ldb: ldb, c: pc.baseAddress!, ldc: ldc)
                        }
                    }
                }
            }
            let written = (count + 3) / 4 * 4
            var actual = [Float](), expected = [Float]()
            for r in 0..<(m + 8) {
                for j in 0..<ldc {
                    if r < m && j < count {
                        var sum = 0.0
                        for i in 0..<k { sum += Double(a.scalars[r * k + i]) * Double(b.scalars[i * ldb + j]) }
                        actual.append(c[r * ldc + j])
                        expected.append(Float(sum))
                    } else if r >= m || j >= written {
                        XCTAssert(c[r * ldc + j].isNaN, "m \(m) k \(k) count \(count): C[\(r), \(j)] written")
                    }
                }
            }
            assertClose(Tensor(shape: [m, count], scalars: actual), Tensor(shape: [m, count], scalars: expected),
                        tolerance: tolerance(reduction: k), "column tiles m \(m) k \(k) count \(count) split \(split)")
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

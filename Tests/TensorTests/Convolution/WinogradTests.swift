import Tensor
import TestSupport
import XCTest

/// `winogradConv2d` (3×3 stride 1 by F(2×2, 3×3)) against the direct reference, with both tile geometries
/// and through `conv2d`.
final class WinogradTests: XCTestCase {
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

    /// 3×3 stride-1 padding-1 convolutions of 32 or more input channels (16 on AVX-512) run Winograd F(2×2, 3×3):
    /// more than one reduction pass (Cin > 64), output channels that fill no whole register tile,
    /// tile groups crossing grid rows (odd widths) and whole ones (widths a multiple of 16),
    /// several blocks of tile rows.
    func testWinogradShapes() {
        checkConv2d(cin: 131, cout: 13, h: 13, w: 37, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 410)
        checkConv2d(cin: 32, cout: 70, h: 36, w: 64, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .sigmoid, seed: 411)
        checkConv2d(cin: 33, cout: 5, h: 127, w: 2, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 412)
        checkConv2d(cin: 32, cout: 16, h: 160, w: 160, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 413)
        checkConv2d(cin: 32, cout: 1, h: 1, w: 1, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 414)
        checkConv2d(cin: 16, cout: 8, h: 41, w: 37, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 415)
        checkConv2d(cin: 40, cout: 19, h: 15, w: 33, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .relu, seed: 416)
        checkConv2d(cin: 40, cout: 19, h: 15, w: 33, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .leakyReLU, seed: 417)
    }
}

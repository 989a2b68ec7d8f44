import Tensor
import TestSupport
import XCTest

/// `stride2TilesConv2d` (3×3 stride 2 on 2×2 output tiles) against the direct reference.
final class Stride2TilesTests: XCTestCase {
    /// Stride-2 3×3 convolutions on 2×2 output tiles (`stride2TilesConv2d`, one group, 64 or more
    /// output channels, 16 or more input ones): reductions of one and several passes (Cin 50,
    /// 130), rows narrower than 32 floats, of 32 and 40 (8 tiles a vector), of 66, 127, 130 and
    /// 257 (16 a vector), odd and even output sizes (a last tile of one output row or column),
    /// strips across tile rows and ending in narrow strips; output channels filling no whole
    /// register tile; residual; each activation with an epilogue of its own.
    func testStride2TilesBothTileGeometries() {
        var seed: UInt64 = 800
        for tiles in TileGeometry.allCases {
            for (cin, cout, h, w) in [(50, 64, 13, 127), (17, 65, 34, 66), (19, 72, 7, 32), (16, 64, 20, 80), (16, 80, 9, 31),
                                      (130, 67, 11, 40), (24, 96, 2, 9), (20, 64, 17, 130), (21, 64, 4, 257)] {
                let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
                let (ho, wo) = p.outputSize(h: h, w: w)
                let x = randomTensor([1, cin, h, w], seed: seed), weight = randomTensor([cout, cin, 3, 3], seed: seed &+ 1)
                let bias = randomTensor([cout], seed: seed &+ 2).scalars, res = randomTensor([1, cout, ho, wo], seed: seed &+ 3)
                seed += 4
                let activation = [Activation.silu, .relu, .leakyReLU][Int(seed / 4) % 3]
                let weights = ConvWeights(weight, p)
                XCTAssertEqual(weights.algorithm, .stride2Tiles3x3)
                var y = [Float](repeating: .nan, count: cout * ho * wo)
                y.withUnsafeMutableBufferPointer { py in
                    x.withMap { xm in
                        res.withMap { rm in
                            conv2d(xm, weight: weights, bias: bias, p, activation: activation, residual: rm,
                                   into: Map(py.baseAddress!, channels: cout, height: ho, width: wo), scratch: Scratch(),
                                   tiles: tiles)
                        }
                    }
                }
                let expected = Reference.add(res, Reference.conv2d(x, weight: weight, bias: bias, p, activation: activation))
                assertClose(Tensor(shape: [1, cout, ho, wo], scalars: y), expected, tolerance: tolerance(reduction: cin * 9),
                            "stride 2 \(tiles) \(activation) cin \(cin) cout \(cout) \(h)×\(w)")
            }
        }
    }
}

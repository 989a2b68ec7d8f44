import Tensor
import TestSupport
import XCTest

/// The choice table on representative shapes, at and around each threshold, and the layout each
/// choice gives `ConvWeights`.
final class ConvAlgorithmTests: XCTestCase {
    func testChoiceTable() {
        let wide = TileGeometry.target == .avx512
        let cases: [(shape: [Int], p: Conv2DParameters, expected: ConvAlgorithm)] = [
            // One filter per channel, whatever the kernel and stride; one channel into one too.
            ([16, 1, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1, groups: 16), .depthwise),
            ([64, 1, 5, 5], Conv2DParameters(kernel: 5, stride: 2, padding: 2, groups: 64), .depthwise),
            ([1, 1, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), .depthwise),
            // Winograd: 3×3 stride 1 padding 1, one group, from 32 input channels (16 with 512-bit vectors).
            ([32, 32, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), .winograd3x3),
            ([8, 256, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), .winograd3x3),
            ([64, 31, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), wide ? .winograd3x3 : .gemm),
            ([64, 16, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), wide ? .winograd3x3 : .gemm),
            ([64, 15, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), .gemm),
            ([64, 32, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 0), .gemm),
            ([64, 32, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1, groups: 2), .gemm),
            // 2×2 tiles: 3×3 stride 2 padding 1, one group, from 64 output channels and 16 input ones.
            ([64, 16, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .stride2Tiles3x3),
            ([63, 64, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .gemm),
            ([256, 15, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .gemm),
            ([64, 3, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .gemm),
            ([512, 256, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .stride2Tiles3x3),
            ([512, 512, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), .stride2Tiles3x3),
            ([64, 16, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 0), .gemm),
            ([128, 32, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1, groups: 2), .gemm),
            // Everything else.
            ([256, 128, 1, 1], Conv2DParameters(kernel: 1), .gemm),
            ([64, 64, 5, 5], Conv2DParameters(kernel: 5, stride: 1, padding: 2), .gemm),
            ([32, 8, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1, groups: 4), .gemm),
        ]
        for (shape, p, expected) in cases {
            XCTAssertEqual(ConvAlgorithm(weightShape: shape, p), expected, "\(shape) \(p)")
        }
    }

    /// Each algorithm's layout: weights as they are, 16 or 25 transformed panels, or GEMM panels
    /// of 8 output channels per group.
    func testWeightsFollowTheirAlgorithm() {
        let cases: [(shape: [Int], p: Conv2DParameters, floats: Int)] = [
            ([13, 1, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1, groups: 13), 13 * 9),
            ([13, 40, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1), 16 * 2 * 40 * 8),
            ([65, 17, 3, 3], Conv2DParameters(kernel: 3, stride: 2, padding: 1), 25 * 9 * 17 * 8),
            ([18, 3, 3, 3], Conv2DParameters(kernel: 3, stride: 1, padding: 1, groups: 2), 2 * 2 * 27 * 8),
        ]
        for (i, (shape, p, floats)) in cases.enumerated() {
            let weights = ConvWeights(randomTensor(shape, seed: UInt64(i)), p)
            XCTAssertEqual(weights.algorithm, ConvAlgorithm(weightShape: shape, p), "\(shape) \(p)")
            XCTAssertEqual(weights.values.count, floats, "\(shape) \(p): \(weights.algorithm)")
        }
    }
}

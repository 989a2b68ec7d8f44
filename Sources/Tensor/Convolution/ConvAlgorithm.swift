/// The kernel a convolution runs on, chosen once, when its weights are laid out (`ConvWeights`):
/// the layout of the weights follows it.
public enum ConvAlgorithm: Sendable, Equatable, CaseIterable {
    /// One filter per channel, summed directly: `DepthwiseRows` at stride 1, else `depthwiseConv2d`
    /// on the phase planes. Weights as they are.
    case depthwise
    /// 3×3, stride 1, padding 1 by Winograd's F(2×2, 3×3) (`winogradConv2d`). Weights: `Winograd.panels`.
    case winograd3x3
    /// 3×3, stride 2, padding 1 on 2×2 output tiles (`stride2TilesConv2d`). Weights: `Stride2Tiles.panels`.
    case stride2Tiles3x3
    /// One GEMM per group over an implicit im2col (`packedGEMM`). Weights: GEMM panels.
    case gemm

    /// The algorithm for weights [Cout, Cin / groups, kH, kW] of geometry `p`; every threshold of
    /// the choice is here, first match wins.
    public init(weightShape shape: [Int], _ p: Conv2DParameters) {
        let (outputs, inputsPerGroup) = (shape[0], shape[1])
        if inputsPerGroup == 1 && p.groups == outputs {
            // One filter per channel: no sum across channels for a GEMM to share.
            self = .depthwise
        } else if p == Conv2DParameters(kernel: 3, stride: 1, padding: 1) && inputsPerGroup >= (wideVectors ? 16 : 32) {
            // Its per-tile transforms pay only over enough input channels (fewer with 512-bit vectors).
            self = .winograd3x3
        } else if p == Conv2DParameters(kernel: 3, stride: 2, padding: 1) && outputs >= 64 && inputsPerGroup >= 16 {
            // Its per-strip B panels pay only when 64 or more output channels share them; its nine
            // GEMMs' sums, combined per tile, only over 16 or more input channels (an image's 3
            // have 27 products a tile on the phase planes' one GEMM).
            self = .stride2Tiles3x3
        } else {
            self = .gemm
        }
    }
}

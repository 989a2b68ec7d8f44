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
            // No sum across channels: a GEMM would multiply one-row panels.
            self = .depthwise
        } else if p == Conv2DParameters(kernel: 3, stride: 1, padding: 1) && inputsPerGroup >= (wideVectors ? 16 : 32) {
            // Its transforms cost the same per tile whatever the channels: below this many input
            // channels they cost more than its GEMMs save (measured: fewer with 512-bit vectors).
            self = .winograd3x3
        } else if p == Conv2DParameters(kernel: 3, stride: 2, padding: 1) && outputs >= 64 {
            // Its B panels, built per strip, are shared by the output channels: below 64 channels
            // their cost outweighs the 11 multiply-adds in 36 the tiles save.
            self = .stride2Tiles3x3
        } else {
            self = .gemm
        }
    }
}

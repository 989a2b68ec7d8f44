/// Convolution weights [Cout, Cin / groups, kH, kW], laid out once (at load) for the kernel that
/// runs their geometry (`algorithm`): depthwise weights as they are; Winograd's transformed
/// (`Winograd.panels`); 2×2 tiles' (`Stride2Tiles.panels`); the others as GEMM panels of 8
/// output channels, [groups][⌈Cout/g / 8⌉][K = Cin/g · kH · kW][8], zero-padded past the last
/// channel, so the micro-kernel reads the 8 weights of one reduction step from one cache line.
public struct ConvWeights: Sendable {
    /// [Cout, Cin / groups, kH, kW].
    public let shape: [Int]
    public let groups: Int
    /// The kernel these weights are laid out for.
    public let algorithm: ConvAlgorithm
    package let values: [Float]

    public init(_ weight: Tensor, _ p: Conv2DParameters) {
        let groups = p.groups
        precondition(weight.rank == 4 && weight.shape[0] % groups == 0 && weight.shape[2] == p.kernelH
                     && weight.shape[3] == p.kernelW, "ConvWeights: weight \(weight.shape) for \(p)")
        shape = weight.shape
        self.groups = groups
        algorithm = ConvAlgorithm(weightShape: shape, p)
        switch algorithm {
        case .depthwise: values = weight.scalars
        case .winograd3x3: values = Winograd.panels(weight)
        case .stride2Tiles3x3: values = Stride2Tiles.panels(weight)
        case .gemm:
            let coutG = shape[0] / groups, k = shape[1] * shape[2] * shape[3], tiles = (coutG + 7) / 8
            var packed = [Float](repeating: 0, count: groups * tiles * k * 8)
            for g in 0..<groups {
                for o in 0..<coutG {
                    let panel = (g * tiles + o / 8) * k * 8, row = (g * coutG + o) * k
                    for i in 0..<k { packed[panel + i * 8 + o % 8] = weight.scalars[row + i] }
                }
            }
            values = packed
        }
    }

    /// Scalars of the weight (padding excluded).
    public var count: Int { shape.reduce(1, *) }
    /// Cin/g · kH · kW: the GEMM's K.
    var reduction: Int { shape[1] * shape[2] * shape[3] }
    var panelsPerGroup: Int { (shape[0] / groups + 7) / 8 }
}

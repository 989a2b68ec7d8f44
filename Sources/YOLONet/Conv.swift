import Tensor

/// Ultralytics `Conv`: Conv2d (padding k/2) + BatchNorm (folded at load) + SiLU, or a plain
/// `nn.Conv2d` with bias and no activation. x: [N, c1, H, W] → [N, c2, H/s, W/s].
package struct Conv: Sendable {
    let weight: ConvWeights
    let bias: [Float]
    let parameters: Conv2DParameters
    let activation: Activation

    init(_ source: inout some WeightSource, _ prefix: String, _ c1: Int, _ c2: Int, k: Int = 1, s: Int = 1,
         g: Int = 1, activation: Activation = .silu, plain: Bool = false) throws {
        // Channel counts derived from a spec's expansion ratios can round to 0.
        guard c1 > 0, c2 > 0, c1 % g == 0 else {
            throw ModelError.invalidArchitecture(layer: -1, reason: "\(prefix): no convolution of \(c1) → \(c2) channels in \(g) groups")
        }
        let (w, b) = try source.conv(prefix, cout: c2, cinPerGroup: c1 / g, kernel: k, plain: plain)
        parameters = Conv2DParameters(kernel: k, stride: s, padding: k / 2, groups: g)
        (weight, bias) = (ConvWeights(w, parameters), b)
        self.activation = plain ? .none : activation
    }

    /// Ultralytics `DWConv`: groups = gcd(c1, c2).
    static func depthwise(_ source: inout some WeightSource, _ prefix: String, _ c1: Int, _ c2: Int, k: Int,
                          s: Int = 1) throws -> Conv {
        try Conv(&source, prefix, c1, c2, k: k, s: s, g: gcd(c1, c2))
    }

    /// The convolution into `y`, plus `residual` (the output's shape) added after the activation.
    func callAsFunction(_ x: Map, into y: Map, residual: Map? = nil, _ ws: Workspace) {
        conv2d(x, weight: weight, bias: bias, parameters, activation: activation, residual: residual, into: y,
               scratch: ws.scratch)
    }

    /// The convolution into a new map of `ws`.
    func callAsFunction(_ x: Map, _ ws: Workspace) -> Map {
        let y = output(x, ws)
        self(x, into: y, ws)
        return y
    }

    /// A map of `ws` for this convolution's output on `x`.
    func output(_ x: Map, _ ws: Workspace) -> Map {
        let (h, w) = parameters.outputSize(h: x.height, w: x.width)
        return ws.map(channels: weight.shape[0], height: h, width: w)
    }

    /// Multiply-adds × 2 for an output of `outputShape`.
    func flops(outputShape: [Int]) -> Double {
        2 * Double(outputShape.reduce(1, *)) * Double(weight.shape[1] * weight.shape[2] * weight.shape[3])
    }
}

func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

import Tensor

/// Ultralytics `Conv`: Conv2d (padding k/2 unless given) + BatchNorm (folded at load) + the
/// graph's activation (`defaultActivation`), or a plain `nn.Conv2d` with bias and no activation.
/// x: [N, c1, H, W] → [N, c2, H/s, W/s].
struct Conv: Layer {
    /// The activation of a Conv built without one: SiLU, or while `Network` builds a graph, its
    /// spec's `activation` (Ultralytics sets `Conv.default_act` for as long as it parses one).
    @TaskLocal static var defaultActivation: Activation = .silu

    /// Its `state_dict` prefix, the name its output is observed by.
    let name: String
    /// The weights as the kernel that runs them takes them.
    let weights: Weights
    /// [Cout, Cin / groups, kH, kW].
    let shape: [Int]
    let bias: [Float]
    let parameters: Conv2DParameters
    let activation: Activation

    /// `upsampledFront`: the input's first channels are a coarser map upsampled (`ModuleSpec`);
    /// an fp32 1×1 convolution then runs on the two parts apart (`callAsFunction(coarse:rest:)`).
    init(_ source: inout some WeightSource, _ prefix: String, _ c1: Int, _ c2: Int, k: Int = 1, s: Int = 1, p: Int? = nil,
         g: Int = 1, activation: Activation = Conv.defaultActivation, plain: Bool = false,
         upsampledFront: UpsampledFront? = nil) throws {
        // Channel counts derived from a spec's expansion ratios can round to 0.
        guard c1 > 0, c2 > 0, c1 % g == 0 else {
            throw ModelError.invalidArchitecture(layer: -1, reason: "\(prefix): no convolution of \(c1) → \(c2) channels in \(g) groups")
        }
        let (w, b) = try source.conv(prefix, cout: c2, cinPerGroup: c1 / g, kernel: k, plain: plain)
        // An int8 graph quantizes its ungrouped convolutions but for the heads' plain outputs.
        let quantized = source.precision == .int8 && g == 1 && !plain
        self.init(prefix, weight: w, bias: b, s: s, p: p, g: g, activation: plain ? .none : activation, quantized: quantized,
                  upsampledFront: upsampledFront)
    }

    /// A convolution of weights [c2, c1 / g, k, k] and bias [c2] made at load (a reparameterized
    /// block's sum of branches), padding `p` or k/2; `quantized`: run in int8; else split over
    /// `upsampledFront` when it is a plain 1×1 convolution.
    init(_ name: String, weight w: Tensor, bias b: [Float], s: Int = 1, p: Int? = nil, g: Int = 1, activation: Activation,
         quantized: Bool, upsampledFront: UpsampledFront? = nil) {
        parameters = Conv2DParameters(kernel: w.shape[2], stride: s, padding: p ?? w.shape[2] / 2, groups: g)
        if quantized {
            weights = .int8(QuantizedConvWeights(w))
        } else if let front = upsampledFront, parameters == Conv2DParameters(kernel: 1), front.channels < w.shape[1] {
            weights = .split(UpsampledSplit(w, front: front))
        } else {
            weights = .fp32(ConvWeights(w, parameters))
        }
        (shape, bias) = (w.shape, b)
        self.activation = activation
        self.name = name
    }

    /// A `Conv` or `DWConv` row: [c2, k, s, p], p None or absent for k/2 (YOLOv5's stem: 6, 2, 2).
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let k = try spec.int(1, "kernel", default: 1, in: 1...64), s = try spec.int(2, "stride", default: 1, in: 1...64)
        let p = spec.args.count > 3 && spec.args[3] != .string("None") ? try spec.int(3, "padding", in: 0...k) : nil
        guard spec.args.count <= 4 else { throw spec.fail("\(spec.row.module) supports [c2, k, s, p], got \(spec.args)") }
        try self.init(&weights, spec.prefix, c1, c2, k: k, s: s, p: p, g: spec.row.module == "DWConv" ? gcd(c1, c2) : 1)
    }

    /// Ultralytics `DWConv`: groups = gcd(c1, c2).
    static func depthwise(_ source: inout some WeightSource, _ prefix: String, _ c1: Int, _ c2: Int, k: Int,
                          s: Int = 1) throws -> Conv {
        try Conv(&source, prefix, c1, c2, k: k, s: s, g: gcd(c1, c2))
    }

    /// The convolution into `y`, plus `residual` (the output's shape) added after the activation.
    /// Returns `y` with its range when int8 measured it (`Map.range`): pass that value on.
    @discardableResult
    func callAsFunction(_ x: Map, into y: Map, residual: Map? = nil, _ ws: Workspace) -> Map {
        switch weights {
        case .fp32(let weight):
            conv2d(x, weight: weight, bias: bias, parameters, activation: activation, residual: residual, into: y,
                   scratch: ws.scratch)
            return y.bounded(by: nil)
        case .int8(let weight):
            return y.bounded(by: quantizedConv2d(x, weight: weight, bias: bias, parameters, activation: activation,
                                                 residual: residual, into: y, scratch: ws.scratch))
        case .split:
            preconditionFailure("\(name) runs on its coarse and full-size inputs apart")
        }
    }

    /// A split convolution (`splitsUpsampledFront`) on the concatenation of `coarse` upsampled and
    /// `rest`, into `y`: the coarse part's product at the coarse size (scale² fewer multiply-adds
    /// than on the upsampled map, which is never formed), upsampled onto the rest's, then bias and
    /// activation. The sums add in another order than one product's: within rounding of it.
    func callAsFunction(coarse: Map, rest: Map, into y: Map, _ ws: Workspace) -> Map {
        guard case .split(let split) = weights else { preconditionFailure("\(name) is not split") }
        let t = ws.map(channels: channels, height: coarse.height, width: coarse.width)
        conv2d(coarse, weight: split.coarse, bias: split.zeros, parameters, into: t, scratch: ws.scratch)
        conv2d(rest, weight: split.rest, bias: bias, parameters, into: y, scratch: ws.scratch)
        addUpsampledNearest(t, scale: split.scale, into: y, activation: activation, scratch: ws.scratch)
        ws.release(t)
        return y.bounded(by: nil)
    }

    /// Whether it runs on an upsampled front and the rest apart (built with `upsampledFront`).
    var splitsUpsampledFront: Bool {
        if case .split = weights { return true }
        return false
    }

    /// The convolution into a new map of `ws`.
    func callAsFunction(_ x: Map, _ ws: Workspace) -> Map { self(x, into: output(x, ws), ws) }

    /// A map of `ws` for this convolution's output on `x`.
    func output(_ x: Map, _ ws: Workspace) -> Map {
        let (h, w) = parameters.outputSize(h: x.height, w: x.width)
        return ws.map(channels: channels, height: h, width: w)
    }

    var channels: Int { shape[0] }
    var parameterCount: Int { shape.reduce(1, *) + bias.count }
    func outputStride(_ inputStride: Int) -> Int { inputStride * parameters.strideH }
    func outputSize(height: Int, width: Int) -> Plane {
        let (h, w) = parameters.outputSize(h: height, w: width)
        return (h, w)
    }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        self(input(0), into: y!, ws)
    }

    func flops(inputs: [Plane], output: Plane) -> Double { flops(output) }

    /// Multiply-adds × 2 for an output plane.
    func flops(_ output: Plane) -> Double {
        2 * Double(channels * output.height * output.width) * Double(shape[1] * shape[2] * shape[3])
    }
}

extension Conv {
    /// Weights laid out for `conv2d`, or quantized for `quantizedConv2d` in an int8 graph.
    enum Weights {
        case fp32(ConvWeights)
        case int8(QuantizedConvWeights)
        case split(UpsampledSplit)
    }

    /// A 1×1 convolution's weights [Cout, Cin, 1, 1] as W = [W_coarse | W_rest] over its input's
    /// upsampled front and the rest.
    struct UpsampledSplit {
        let scale: Int
        let coarse: ConvWeights, rest: ConvWeights
        /// The coarse product's bias: the rest's product adds the convolution's.
        let zeros: [Float]

        init(_ w: Tensor, front: UpsampledFront) {
            let (cout, cin, c) = (w.shape[0], w.shape[1], front.channels), p = Conv2DParameters(kernel: 1)
            func columns(_ range: Range<Int>) -> ConvWeights {
                ConvWeights(Tensor(shape: [cout, range.count, 1, 1],
                                   scalars: (0..<cout).flatMap { o in w.scalars[(o * cin + range.lowerBound)..<(o * cin + range.upperBound)] }), p)
            }
            (scale, coarse, rest, zeros) = (front.scale, columns(0..<c), columns(c..<cin), [Float](repeating: 0, count: cout))
        }
    }
}

extension [Conv] {
    /// The convolutions' FLOPs, all with outputs of one plane.
    func flops(_ output: Plane) -> Double { reduce(0) { $0 + $1.flops(output) } }
    var parameterCount: Int { reduce(0) { $0 + $1.parameterCount } }
}

func gcd(_ a: Int, _ b: Int) -> Int { b == 0 ? a : gcd(b, a % b) }

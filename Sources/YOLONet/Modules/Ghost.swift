import Tensor

/// Ultralytics `GhostConv`: half the outputs from a k×k conv (cv1), the other half a cheap 5×5
/// depthwise conv of them (cv2). x: [c1, H, W] → [2·(c2/2), H/s, W/s].
struct GhostConv: Layer {
    let name: String
    let cv1: Conv, cv2: Conv

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, k: Int = 1, s: Int = 1, g: Int = 1,
         activation: Activation = Conv.defaultActivation) throws {
        let hidden = c2 / 2
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, k: k, s: s, g: g, activation: activation)
        cv2 = try Conv(&w, p + ".cv2", hidden, hidden, k: 5, g: hidden, activation: activation)
        name = p
    }

    /// A `GhostConv` row: [c2, k, s, g].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count <= 4 else { throw spec.fail("GhostConv supports [c2, k, s, g], got \(spec.args)") }
        try self.init(&w, spec.prefix, spec.inputChannels[0], try spec.outChannels(), k: try spec.int(1, "kernel", default: 1, in: 1...63),
                      s: try spec.int(2, "stride", default: 1, in: 1...64), g: try spec.int(3, "groups", default: 1))
    }

    var channels: Int { 2 * cv1.channels }
    var parameterCount: Int { [cv1, cv2].parameterCount }
    func outputStride(_ inputStride: Int) -> Int { cv1.outputStride(inputStride) }
    func outputSize(height: Int, width: Int) -> Plane { cv1.outputSize(height: height, width: width) }
    func flops(inputs: [Plane], output: Plane) -> Double { [cv1, cv2].flops(output) }

    /// cv1 writes the first half of `y`, cv2 reads it and writes the second, plus `residual`'s
    /// second half when given (its first half is the caller's to add).
    func callAsFunction(_ x: Map, into y: Map, residual: Map? = nil, _ ws: Workspace) -> Map {
        let hidden = cv1.channels
        let first = cv1(x, into: y.channels(0..<hidden), ws)
        ws.observe(cv1.name, first)
        let second = cv2(first, into: y.channels(hidden..<(2 * hidden)),
                         residual: residual?.channels(hidden..<(2 * hidden)), ws)
        return y.bounded(by: .union(first.range, second.range))
    }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        self(input(0), into: y!, ws)
    }
}

/// Ultralytics `GhostBottleneck` of stride 1 (the one `C3Ghost` chains): x + conv.2(conv.0(x)),
/// two GhostConvs through c2/2 channels, the second unactivated. x: [c, H, W] → [c, H, W].
struct GhostBottleneck: CSPBlock {
    let name: String
    let conv0: GhostConv, conv2: GhostConv

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int) throws {
        guard c1 == c2, c2 % 4 == 0 else {
            throw ModelError.invalidArchitecture(layer: -1, reason: "\(p): a GhostBottleneck needs c1 == c2, a multiple of 4, got \(c1), \(c2)")
        }
        conv0 = try GhostConv(&w, p + ".conv.0", c1, c2 / 2)
        conv2 = try GhostConv(&w, p + ".conv.2", c2 / 2, c2, activation: .none)
        name = p
    }

    var channels: Int { conv2.channels }
    var convs: [Conv] { [conv0.cv1, conv0.cv2, conv2.cv1, conv2.cv2] }

    /// conv.2's second half adds x's in its epilogue; its first half, which cv2 reads, gets x's
    /// after. Its range is then unknown.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let t = conv0(x, into: ws.map(channels: conv0.channels, like: x), ws)
        ws.observe(conv0.name, t)
        _ = conv2(t, into: y, residual: x, ws)
        ws.release(t)
        let half = conv2.cv1.channels
        addVectors(y.base, x.base, into: y.base, count: half * y.plane)
        return y.bounded(by: nil)
    }
}

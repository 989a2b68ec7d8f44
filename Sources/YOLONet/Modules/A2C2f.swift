import Tensor

extension PSABlock {
    /// Ultralytics `ABlock`: x + AAttn(x), then + mlp (1×1 to int(c · mlpRatio) with SiLU, 1×1
    /// back). AAttn is `Attention` with heads of 32 channels, keys as wide as values, a 7×7
    /// positional encoding and `areas` areas. x: [c, H, W] → [c, H, W].
    init(area w: inout some WeightSource, _ p: String, _ c: Int, areas: Int, mlpRatio: Double) throws {
        attn = try Attention(&w, p + ".attn", c, heads: c / 32, attnRatio: 1, peKernel: 7, areas: areas)
        let hidden = Int(Double(c) * mlpRatio)
        ffn0 = try Conv(&w, p + ".mlp.0", c, hidden)
        ffn1 = try Conv(&w, p + ".mlp.1", hidden, c, activation: .none)
        name = p
    }
}

/// Ultralytics `A2C2f` (YOLO12): cv1 to c = int(c2 · e) channels, n blocks chained on it, cv2
/// over all pieces. A block is two ABlocks (`m.i.0`, `m.i.1`) with `a2`, else a C3k. With a2 and
/// `residual` (the l and x scales) the output is x + γ · cv2(…), γ per channel (`gamma`).
/// x: [c1, H, W] → [c2, H, W].
struct A2C2f: Layer {
    /// A block with a2: two ABlocks (`m.i.0`, `m.i.1`) one after the other, the last into y.
    struct ABlocks: CSPBlock {
        let name: String
        let blocks: [PSABlock]

        var channels: Int { blocks[0].ffn1.channels }
        var convs: [Conv] { blocks.flatMap(\.convs) }
        var attention: [Attention] { blocks.map(\.attn) }

        func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
            var a = x
            for (j, block) in blocks.enumerated() {
                let last = j == blocks.count - 1
                let next = block(a, into: last ? y : ws.map(channels: y.channels, like: y), ws)
                if !last { ws.observe(block.name, next) }
                if j > 0 { ws.release(a) }
                a = next
            }
            return a
        }
    }

    static var repeatable: Bool { true }

    let chain: Chain
    /// γ as a depthwise 1×1 convolution of zero bias whose residual is x: x + γ · t.
    let gamma: Conv?

    /// An `A2C2f` row: [c2, a2, area, residual, mlp_ratio, e, g, shortcut]. Ultralytics appends
    /// (residual, mlp_ratio) = (true, 1.2) to the rows of the l and x scales.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2, p) = (spec.inputChannels[0], try spec.outChannels(), spec.prefix)
        let a2 = try spec.bool(1, "a2", default: true)
        let large = ["l", "x"].contains(spec.architecture.resolvedScale ?? "")
        guard !large || spec.args.count <= 3 else {
            throw spec.fail("an A2C2f row of scale l or x takes [c2, a2, area] (its residual and mlp_ratio are implied), got \(spec.args)")
        }
        let residual = large ? true : try spec.bool(3, "residual", default: false)
        let mlpRatio = large ? 1.2 : try spec.double(4, "mlp_ratio", default: 2)
        let c = Int(Double(c2) * (try spec.double(5, "expansion", default: 0.5)))
        guard try spec.int(6, "groups", default: 1) == 1 else { throw spec.fail("grouped A2C2f is not supported") }
        let shortcut = try spec.bool(7, "shortcut", default: true)
        guard c % 32 == 0 else { throw spec.fail("A2C2f's hidden channels \(c) must be a multiple of 32 (heads of 32)") }
        let areas = a2 ? try spec.int(2, "area", default: 1, in: 1...64) : 1
        let cv1 = try Conv(&w, p + ".cv1", c1, c), cv2 = try Conv(&w, p + ".cv2", (1 + spec.repeats) * c, c2)
        let blocks: [any CSPBlock] = try (0..<spec.repeats).map { i in
            let q = p + ".m.\(i)"
            guard a2 else { return try C3k(&w, q, c, c, n: 2, shortcut: shortcut) }
            return ABlocks(name: q, blocks: try (0..<2).map { try PSABlock(area: &w, q + ".\($0)", c, areas: areas, mlpRatio: mlpRatio) })
        }
        chain = Chain(first: cv1, last: cv2, blocks: blocks, tail: c)
        if a2 && residual {
            guard c1 == c2 else { throw spec.fail("A2C2f with a residual needs c1 == c2, got \(c1), \(c2)") }
            let scale = try w.tensor(p + ".gamma", shape: [c2])
            gamma = Conv(p + ".gamma", weight: Tensor(shape: [c2, 1, 1, 1], scalars: scale.scalars),
                         bias: [Float](repeating: 0, count: c2), g: c2, activation: .none, quantized: false)
        } else {
            gamma = nil
        }
    }

    var channels: Int { chain.channels }
    var parameterCount: Int { chain.convs.parameterCount + (gamma?.channels ?? 0) }
    var consumesInput: Bool { gamma == nil }
    var hasAttention: Bool { !chain.attention.isEmpty }
    var attentionAreas: Int { chain.attention.map(\.areas).min() ?? 1 }
    func flops(inputs: [Plane], output: Plane) -> Double { chain.flops(output) }

    /// With γ, x is read last, by γ's residual: the layer keeps its input and takes `y`.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let x = input(0)
        guard let gamma else { return chain(x, into: y, consuming: consuming, ws) }
        let t = chain(x, into: ws.map(channels: channels, like: x), consuming: false, ws)
        ws.observe(chain.last.name, t)
        let out = gamma(t, into: y!, residual: x, ws)
        ws.release(t)
        return out
    }
}

import Foundation
import Tensor

/// Ultralytics `Attention`: multi-head self-attention over the H·W positions, plus a 3×3
/// depthwise positional encoding of v. x: [1, C, H, W] → [1, C, H, W]. Also YOLO12's `AAttn`
/// (keys as wide as values, a 7×7 encoding, attention within each of `areas` runs of rows).
struct Attention: Sendable {
    let qkv: Conv, proj: Conv, pe: Conv
    let heads: Int, keyDim: Int, headDim: Int, areas: Int
    let scale: Float

    init(_ w: inout some WeightSource, _ p: String, _ dim: Int, heads: Int, attnRatio: Double = 0.5, peKernel: Int = 3,
         areas: Int = 1) throws {
        guard dim % heads == 0 else {
            throw ModelError.invalidArchitecture(layer: -1, reason: "\(p): \(dim) channels do not split into \(heads) heads")
        }
        (self.heads, self.areas) = (heads, areas)
        headDim = dim / heads
        keyDim = Int(Double(headDim) * attnRatio)
        scale = Float(pow(Double(keyDim), -0.5))
        qkv = try Conv(&w, p + ".qkv", dim, dim + 2 * keyDim * heads, activation: .none)
        proj = try Conv(&w, p + ".proj", dim, dim, activation: .none)
        pe = try Conv(&w, p + ".pe", dim, dim, k: peKernel, g: dim, activation: .none)
    }

    /// attention(x) + residual into y.
    /// Returns `y` as proj returns it (`Conv.callAsFunction`).
    func callAsFunction(_ x: Map, into y: Map, residual: Map? = nil, _ ws: Workspace) -> Map {
        let (c, n) = (x.channels, x.plane)
        // qkv: [heads·(2·keyDim + headDim), H, W] viewed as [heads, 2·keyDim + headDim, N].
        let qkv = qkv(x, ws), out = ws.map(channels: c, like: x), v = ws.map(channels: c, like: x)
        ws.observe(self.qkv.name, qkv)
        attention(qkv.base, heads: heads, keyDim: keyDim, headDim: headDim, positions: n, areas: areas, scale: scale,
                  into: out.base, scratch: ws.scratch)  // [heads, headDim, N]
        let rows = 2 * keyDim + headDim
        for h in 0..<heads { qkv.channels((h * rows + 2 * keyDim)..<((h + 1) * rows)).write(to: v.channels((h * headDim)..<((h + 1) * headDim))) }
        let encoded = ws.map(channels: c, like: x)
        pe(v, into: encoded, residual: out, ws)
        let result = proj(encoded, into: y, residual: residual, ws)
        ws.release(encoded)
        ws.release(v)
        ws.release(out)
        ws.release(qkv)
        return result
    }

    /// qᵀk ([N, keyDim] · [keyDim, N]) and v·attnᵀ ([headDim, N] · [N, N]) for every head, over
    /// N / areas positions in each area.
    func matmulFLOPs(positions n: Int) -> Double {
        2 * Double(heads) * Double(n) * Double(n / areas) * Double(keyDim + headDim)
    }
}

/// Ultralytics `PSABlock`: x + attn(x), then + ffn (1×1 expand ×2 with SiLU, 1×1 back).
struct PSABlock: Sendable {
    let name: String
    let attn: Attention
    let ffn0: Conv, ffn1: Conv

    init(_ w: inout some WeightSource, _ p: String, _ c: Int, heads: Int) throws {
        attn = try Attention(&w, p + ".attn", c, heads: heads)
        ffn0 = try Conv(&w, p + ".ffn.0", c, 2 * c)
        ffn1 = try Conv(&w, p + ".ffn.1", 2 * c, c, activation: .none)
        name = p
    }

    var convs: [Conv] { [attn.qkv, attn.proj, attn.pe, ffn0, ffn1] }

    /// y may be x: x is last read before y is written. Returns `y` as ffn1 returns it
    /// (`Conv.callAsFunction`).
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let a = attn(x, into: ws.map(channels: x.channels, like: x), residual: x, ws)
        let f = ffn0(a, ws)
        ws.observe(ffn0.name, f)
        let out = ffn1(f, into: y, residual: a, ws)
        ws.release(f)
        ws.release(a)
        return out
    }
}

/// Ultralytics `C2PSA`: cv1 splits into (a, b), b runs through `n` PSABlocks, cv2 joins.
struct C2PSA: Layer {
    let cv1: Conv, cv2: Conv
    let hidden: Int
    let m: [PSABlock]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int, e: Double) throws {
        guard c1 == c2 else { throw ModelError.invalidArchitecture(layer: -1, reason: "\(p): C2PSA needs c1 == c2, got \(c1), \(c2)") }
        hidden = Int(Double(c1) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, 2 * hidden)
        cv2 = try Conv(&w, p + ".cv2", 2 * hidden, c1)
        let c = hidden
        m = try (0..<n).map { try PSABlock(&w, p + ".m.\($0)", c, heads: max(c / 64, 1)) }
    }

    static var repeatable: Bool { true }

    /// A `C2PSA` row: [c2, e].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let channels = try spec.outChannels()
        try self.init(&w, spec.prefix, spec.inputChannels[0], channels, n: spec.repeats,
                      e: try spec.double(1, "expansion", default: 0.5))
    }

    var channels: Int { cv2.channels }
    var convs: [Conv] { [cv1, cv2] + m.flatMap(\.convs) }
    var parameterCount: Int { convs.parameterCount }
    var hasAttention: Bool { !m.isEmpty }

    func flops(inputs: [Plane], output: Plane) -> Double {
        m.reduce(convs.flops(output)) { $0 + $1.attn.matmulFLOPs(positions: output.height * output.width) }
    }

    /// The blocks run in place on the second half of cv1's output, which is cv2's input.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let ab = cv1(input(0), ws)
        ws.observe(cv1.name, ab)
        // The blocks rewrite b in place: cv1's range still bounds a, the last block's bounds b.
        var b = ab.channels(hidden..<(2 * hidden)).bounded(by: ab.range)
        for block in m {
            b = block(b, into: b, ws)
            ws.observe(block.name, b)
        }
        let out = cv2(ab.bounded(by: .union(ab.range, b.range)), into: y!, ws)
        ws.release(ab)
        return out
    }
}

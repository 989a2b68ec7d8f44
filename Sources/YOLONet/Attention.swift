import Foundation
import Tensor

/// Ultralytics `Attention`: multi-head self-attention over the H·W positions, plus a 3×3
/// depthwise positional encoding of v. x: [1, C, H, W] → [1, C, H, W].
struct Attention: Sendable {
    let qkv: Conv, proj: Conv, pe: Conv
    let heads: Int, keyDim: Int, headDim: Int
    let scale: Float

    init(_ w: inout some WeightSource, _ p: String, _ dim: Int, heads: Int, attnRatio: Double = 0.5) throws {
        guard dim % heads == 0 else {
            throw ModelError.invalidArchitecture(layer: -1, reason: "\(p): \(dim) channels do not split into \(heads) heads")
        }
        self.heads = heads
        headDim = dim / heads
        keyDim = Int(Double(headDim) * attnRatio)
        scale = Float(pow(Double(keyDim), -0.5))
        qkv = try Conv(&w, p + ".qkv", dim, dim + 2 * keyDim * heads, activation: .none)
        proj = try Conv(&w, p + ".proj", dim, dim, activation: .none)
        pe = try Conv(&w, p + ".pe", dim, dim, k: 3, g: dim, activation: .none)
    }

    /// attention(x) + residual.
    func callAsFunction(_ x: Tensor, residual: Tensor? = nil) -> Tensor {
        let (c, h, wd) = (x.shape[1], x.shape[2], x.shape[3])
        let n = h * wd
        // qkv: [1, heads·(2·keyDim + headDim), H, W] viewed as [heads, 2·keyDim + headDim, N].
        let qkv = qkv(x).reshaped([heads, 2 * keyDim + headDim, n])
        let out = attention(qkv, keyDim: keyDim, headDim: headDim, scale: scale)  // [heads, headDim, N]
        let v = slice(qkv, (2 * keyDim)..<(2 * keyDim + headDim), axis: 1)
        return proj(pe(v.reshaped([1, c, h, wd]), residual: out.reshaped([1, c, h, wd])), residual: residual)
    }
}

/// Ultralytics `PSABlock`: x + attn(x), then + ffn (1×1 expand ×2 with SiLU, 1×1 back).
struct PSABlock: Sendable {
    let attn: Attention
    let ffn0: Conv, ffn1: Conv

    init(_ w: inout some WeightSource, _ p: String, _ c: Int, heads: Int) throws {
        attn = try Attention(&w, p + ".attn", c, heads: heads)
        ffn0 = try Conv(&w, p + ".ffn.0", c, 2 * c)
        ffn1 = try Conv(&w, p + ".ffn.1", 2 * c, c, activation: .none)
    }

    func callAsFunction(_ x: Tensor) -> Tensor {
        let y = attn(x, residual: x)
        return ffn1(ffn0(y), residual: y)
    }
}

/// Ultralytics `C2PSA`: cv1 splits into (a, b), b runs through `n` PSABlocks, cv2 joins.
struct C2PSA: Sendable {
    let cv1: Conv, cv2: Conv
    let hidden: Int
    let m: [PSABlock]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int, e: Double) throws {
        guard c1 == c2 else { throw ModelError.invalidArchitecture(layer: -1, reason: "C2PSA needs c1 == c2, got \(c1), \(c2)") }
        hidden = Int(Double(c1) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, 2 * hidden)
        cv2 = try Conv(&w, p + ".cv2", 2 * hidden, c1)
        let c = hidden
        m = try (0..<n).map { try PSABlock(&w, p + ".m.\($0)", c, heads: max(c / 64, 1)) }
    }

    func callAsFunction(_ x: Tensor) -> Tensor {
        let ab = split(cv1(x), sizes: [hidden, hidden], axis: 1)
        return cv2(concat([ab[0], m.reduce(ab[1]) { $1($0) }], axis: 1))
    }
}

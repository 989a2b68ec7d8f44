import Tensor

/// Ultralytics `CIB` (compact inverted block), as C2fCIB builds it (e = 1): five convolutions
/// `cv1.0`–`cv1.4` (3×3 depthwise, 1×1 to 2·c2, 3×3 depthwise or with `lk` a RepVGGDW 7×7,
/// 1×1 to c2, 3×3 depthwise), plus x when `shortcut` and c1 == c2. x: [c1, H, W] → [c2, H, W].
struct CIB: CSPBlock {
    let name: String
    let cv1: [Conv]
    let residual: Bool

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, shortcut: Bool, lk: Bool) throws {
        let q = p + ".cv1"
        cv1 = [try Conv.depthwise(&w, q + ".0", c1, c1, k: 3), try Conv(&w, q + ".1", c1, 2 * c2),
               lk ? try Conv.repVGGDW(&w, q + ".2", 2 * c2) : try Conv.depthwise(&w, q + ".2", 2 * c2, 2 * c2, k: 3),
               try Conv(&w, q + ".3", 2 * c2, c2), try Conv.depthwise(&w, q + ".4", c2, c2, k: 3)]
        residual = shortcut && c1 == c2
        name = p
    }

    var channels: Int { cv1[4].channels }
    var convs: [Conv] { cv1 }

    /// Each convolution into a map of its own, the last into y with the residual.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        var a = x
        for conv in cv1.dropLast() {
            let next = conv(a, ws)
            ws.observe(conv.name, next)
            if a.base != x.base { ws.release(a) }
            a = next
        }
        let out = cv1[4](a, into: y, residual: residual ? x : nil, ws)
        ws.release(a)
        return out
    }
}

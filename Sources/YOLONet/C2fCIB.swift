import Tensor

/// Ultralytics `CIB` (compact inverted block), as C2fCIB builds it (e = 1): five convolutions
/// `cv1.0`–`cv1.4` (3×3 depthwise, 1×1 to 2·c2, 3×3 depthwise or with `lk` a RepVGGDW 7×7,
/// 1×1 to c2, 3×3 depthwise), plus x when `shortcut` and c1 == c2. x: [c1, H, W] → [c2, H, W].
struct CIB: ChainBlock {
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

/// Ultralytics `C2fCIB` (YOLOv10): a C2f whose blocks are CIBs. cv1 to 2·c (c = int(c2 · e))
/// split in halves, n CIBs chained on the second, cv2 over all pieces. x: [c1, H, W] → [c2, H, W].
struct C2fCIB: Layer {
    static var repeatable: Bool { true }

    let chain: Chain<CIB>

    /// A `C2fCIB` row: [c2, shortcut, lk, g, e].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let shortcut = try spec.bool(1, "shortcut", default: false), lk = try spec.bool(2, "lk", default: false)
        guard try spec.int(3, "groups", default: 1) == 1 else { throw spec.fail("grouped C2fCIB is not supported") }
        let c = Int(Double(c2) * (try spec.double(4, "expansion", default: 0.5))), p = spec.prefix
        let cv1 = try Conv(&w, p + ".cv1", c1, 2 * c), cv2 = try Conv(&w, p + ".cv2", (2 + spec.repeats) * c, c2)
        chain = Chain(first: cv1, last: cv2,
                      blocks: try (0..<spec.repeats).map { try CIB(&w, p + ".m.\($0)", c, c, shortcut: shortcut, lk: lk) }, tail: c)
    }

    var channels: Int { chain.last.channels }
    var parameterCount: Int { chain.convs.parameterCount }
    var consumesInput: Bool { true }
    func flops(inputs: [Plane], output: Plane) -> Double { chain.convs.flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        chain(input(0), into: y, consuming: consuming, ws)
    }
}

import Tensor

/// Ultralytics `C2f` (YOLOv8), `C3k2` (a C2f whose blocks are Bottlenecks, C3k, or Bottleneck +
/// PSABlock; YOLO11, YOLO26) and `C2fCIB` (YOLOv10; CIBs): a `Chain` on cv1(x)'s two halves,
/// cv2 over all pieces. x: [c1, H, W] → [c2, H, W]; pieces of int(c2 · e) channels.
struct C2f: Layer {
    static var repeatable: Bool { true }

    let chain: Chain

    /// `block(weights, prefix, hidden)` builds each of the `n` blocks.
    init<W: WeightSource>(_ w: inout W, _ p: String, _ c1: Int, _ c2: Int, n: Int, e: Double,
                          upsampledFront: UpsampledFront?, block: (inout W, String, Int) throws -> any CSPBlock) throws {
        let c = Int(Double(c2) * e)
        let cv1 = try Conv(&w, p + ".cv1", c1, 2 * c, upsampledFront: upsampledFront)
        let cv2 = try Conv(&w, p + ".cv2", (2 + n) * c, c2)
        chain = Chain(first: cv1, last: cv2, blocks: try (0..<n).map { try block(&w, p + ".m.\($0)", c) }, tail: c)
    }

    /// A `C2f` row: [c2, shortcut = false, g, e], 3×3 Bottlenecks (e = 1).
    /// A `C3k2` row: [c2, c3k, e, attn, g, shortcut = true]; the m, l and x scales always use C3k.
    /// A `C2fCIB` row: [c2, shortcut = false, lk, g, e].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        switch spec.row.module {
        case "C3k2":
            let c3k = ["m", "l", "x"].contains(spec.architecture.resolvedScale ?? "") ? true : try spec.bool(1, "c3k", default: false)
            let attention = try spec.bool(3, "attn", default: false), shortcut = try spec.bool(5, "shortcut", default: true)
            guard try spec.int(4, "groups", default: 1) == 1 else { throw spec.fail("grouped C3k2 is not supported") }
            try self.init(&w, spec.prefix, c1, c2, n: spec.repeats, e: try spec.double(2, "expansion", default: 0.5),
                          upsampledFront: spec.upsampledFront) { w, q, c in
                if attention { return try BottleneckPSA(&w, q, c, shortcut: shortcut) }
                if c3k { return try C3k(&w, q, c, c, n: 2, shortcut: shortcut) }
                return try Bottleneck(&w, q, c, c, shortcut: shortcut)
            }
        case "C2fCIB":
            let shortcut = try spec.bool(1, "shortcut", default: false), lk = try spec.bool(2, "lk", default: false)
            guard try spec.int(3, "groups", default: 1) == 1 else { throw spec.fail("grouped C2fCIB is not supported") }
            try self.init(&w, spec.prefix, c1, c2, n: spec.repeats, e: try spec.double(4, "expansion", default: 0.5),
                          upsampledFront: spec.upsampledFront) {
                try CIB(&$0, $1, $2, $2, shortcut: shortcut, lk: lk)
            }
        default:
            let shortcut = try spec.bool(1, "shortcut", default: false), g = try spec.int(2, "groups", default: 1)
            try self.init(&w, spec.prefix, c1, c2, n: spec.repeats, e: try spec.double(3, "expansion", default: 0.5),
                          upsampledFront: spec.upsampledFront) {
                try Bottleneck(&$0, $1, $2, $2, shortcut: shortcut, g: g, e: 1)
            }
        }
    }

    var channels: Int { chain.channels }
    var parameterCount: Int { chain.convs.parameterCount }
    var consumesInput: Bool { true }
    var hasAttention: Bool { !chain.attention.isEmpty }
    func flops(inputs: [Plane], output: Plane) -> Double { chain.flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        chain(input(0), into: y, consuming: consuming, ws)
    }

    var splitsUpsampledFront: Bool { chain.first.splitsUpsampledFront }
    func forward(coarse: Map, rest: Map, into y: Map?, _ ws: Workspace) -> Map {
        chain(coarse: coarse, rest: rest, into: y, ws)
    }
}

/// C3k2's attention block (YOLO26): `nn.Sequential(Bottleneck, PSABlock)`.
struct BottleneckPSA: CSPBlock {
    let name: String
    let bottleneck: Bottleneck, psa: PSABlock

    init(_ w: inout some WeightSource, _ p: String, _ c: Int, shortcut: Bool) throws {
        bottleneck = try Bottleneck(&w, p + ".0", c, c, shortcut: shortcut)
        psa = try PSABlock(&w, p + ".1", c, heads: max(c / 64, 1))
        name = p
    }

    var channels: Int { bottleneck.channels }
    var convs: [Conv] { bottleneck.convs + psa.convs }
    var attention: [Attention] { [psa.attn] }

    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let t = bottleneck(x, into: ws.map(channels: y.channels, like: y), ws)
        ws.observe(bottleneck.name, t)
        let out = psa(t, into: y, ws)
        ws.release(t)
        return out
    }
}

/// Ultralytics `C2` (YOLOv8-p6 necks): cv2(cat(m(a), b)) where (a, b) = cv1(x), the 3×3
/// Bottlenecks (e = 1) chained on a. x: [c1, H, W] → [c2, H, W]; a, b of int(c2 · e) channels.
struct C2: Layer {
    static var repeatable: Bool { true }

    let cv1: Conv, cv2: Conv
    let m: [Bottleneck]

    /// A `C2` row: [c2, shortcut = true, g, e].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let shortcut = try spec.bool(1, "shortcut", default: true), g = try spec.int(2, "groups", default: 1)
        let hidden = Int(Double(c2) * (try spec.double(3, "expansion", default: 0.5)))
        cv1 = try Conv(&w, spec.prefix + ".cv1", c1, 2 * hidden)
        cv2 = try Conv(&w, spec.prefix + ".cv2", 2 * hidden, c2)
        m = try (0..<spec.repeats).map {
            try Bottleneck(&w, spec.prefix + ".m.\($0)", hidden, hidden, shortcut: shortcut, g: g, e: 1)
        }
    }

    var channels: Int { cv2.channels }
    var convs: [Conv] { [cv1, cv2] + m.flatMap(\.convs) }
    var parameterCount: Int { convs.parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { convs.flops(output) }

    /// cv1 writes cv2's input, (a, b); the last block writes a's place. Its input must lie apart
    /// from it: a single block reads a copy of a.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let hidden = cv1.channels / 2
        let ab = cv1(input(0), into: ws.map(channels: 2 * hidden, like: input(0)), ws)
        ws.observe(cv1.name, ab)
        var a = ab.channels(0..<hidden).bounded(by: ab.range)
        if m.count == 1 {
            let copy = ws.map(channels: hidden, like: a)
            a.write(to: copy)
            a = copy.bounded(by: a.range)
        }
        for (j, block) in m.enumerated() {
            let next = block(a, into: j == m.count - 1 ? ab.channels(0..<hidden) : ws.map(channels: hidden, like: a), ws)
            ws.observe(block.name, next)
            if m.count == 1 || j > 0 { ws.release(a) }
            a = next
        }
        let out = cv2(ab.bounded(by: .union(ab.range, a.range)), into: y!, ws)
        ws.release(ab)
        return out
    }
}

import Tensor

/// Ultralytics `C2f` (YOLOv8) and `C3k2` (a C2f whose blocks are Bottlenecks, C3k, or
/// Bottleneck + PSABlock; YOLO11, YOLO26): split cv1(x) into two halves, chain the blocks on the
/// last piece, cv2 over all pieces. x: [c1, H, W] → [c2, H, W]; pieces of int(c2 · e) channels.
struct C2f: Layer {
    static var repeatable: Bool { true }

    let cv1: Conv, cv2: Conv
    let hidden: Int
    let m: [any CSPBlock]

    /// `block(weights, prefix, hidden)` builds each of the `n` blocks.
    init<W: WeightSource>(_ w: inout W, _ p: String, _ c1: Int, _ c2: Int, n: Int, e: Double,
                          block: (inout W, String, Int) throws -> any CSPBlock) throws {
        let c = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, 2 * c)
        cv2 = try Conv(&w, p + ".cv2", (2 + n) * c, c2)
        m = try (0..<n).map { try block(&w, p + ".m.\($0)", c) }
        hidden = c
    }

    /// A `C2f` row: [c2, shortcut = false, g, e], 3×3 Bottlenecks (e = 1).
    /// A `C3k2` row: [c2, c3k, e, attn, g, shortcut = true]; the m, l and x scales always use C3k.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        guard spec.row.module == "C3k2" else {
            let shortcut = try spec.bool(1, "shortcut", default: false), g = try spec.int(2, "groups", default: 1)
            try self.init(&w, spec.prefix, c1, c2, n: spec.repeats, e: try spec.double(3, "expansion", default: 0.5)) {
                try Bottleneck(&$0, $1, $2, $2, shortcut: shortcut, g: g, e: 1)
            }
            return
        }
        let c3k = ["m", "l", "x"].contains(spec.architecture.resolvedScale ?? "") ? true : try spec.bool(1, "c3k", default: false)
        let attention = try spec.bool(3, "attn", default: false), shortcut = try spec.bool(5, "shortcut", default: true)
        guard try spec.int(4, "groups", default: 1) == 1 else { throw spec.fail("grouped C3k2 is not supported") }
        try self.init(&w, spec.prefix, c1, c2, n: spec.repeats, e: try spec.double(2, "expansion", default: 0.5)) { w, q, c in
            if attention { return try BottleneckPSA(&w, q, c, shortcut: shortcut) }
            if c3k { return try C3k(&w, q, c, c, n: 2, shortcut: shortcut) }
            return try Bottleneck(&w, q, c, c, shortcut: shortcut)
        }
    }

    var channels: Int { cv2.channels }
    var convs: [Conv] { [cv1, cv2] + m.convs }
    var parameterCount: Int { convs.parameterCount }
    var consumesInput: Bool { true }
    var hasAttention: Bool { m.contains { $0 is BottleneckPSA } }

    func flops(inputs: [Plane], output: Plane) -> Double {
        convs.flops(output) + m.matmulFLOPs(positions: output.height * output.width)
    }

    /// cv1 writes the first two pieces of cv2's input, each block the next piece from the last.
    /// The output goes into `y` when given, else into a map of `ws` allocated once the blocks are
    /// done; x is released after cv1 when `consuming` (this is its last reader): the block then
    /// holds its input, pieces and output at different times, which lowers yolo26n's peak.
    /// Each piece's range bounds the next block's input, and together they bound cv2's.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let x = input(0)
        let pieces = ws.map(channels: (2 + m.count) * hidden, like: x)
        let head = cv1(x, into: pieces.channels(0..<(2 * hidden)), ws)
        ws.observe(cv1.name, head)
        if consuming { ws.release(x) }
        var last = pieces.channels(hidden..<(2 * hidden)).bounded(by: head.range), range = head.range
        for (j, block) in m.enumerated() {
            last = block(last, into: pieces.channels((2 + j) * hidden..<((3 + j) * hidden)), ws)
            ws.observe(block.name, last)
            range = .union(range, last.range)
        }
        let out = cv2(pieces.bounded(by: range), into: y ?? cv2.output(pieces, ws), ws)
        ws.release(pieces)
        return out
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

    var convs: [Conv] { bottleneck.convs + psa.convs }
    func matmulFLOPs(positions: Int) -> Double { psa.attn.matmulFLOPs(positions: positions) }

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

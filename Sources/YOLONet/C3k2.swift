import Tensor

/// Ultralytics `Bottleneck`: cv2(cv1(x)), plus x when `shortcut` and c1 == c2.
/// Hidden channels int(c2 · e); kernels (k, k).
struct Bottleneck: Sendable {
    let name: String
    let cv1: Conv, cv2: Conv
    let residual: Bool

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, shortcut: Bool = true, k: Int = 3,
         e: Double = 0.5) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, k: k)
        cv2 = try Conv(&w, p + ".cv2", hidden, c2, k: k)
        residual = shortcut && c1 == c2
        name = p
    }

    var convs: [Conv] { [cv1, cv2] }

    /// Returns `y` as cv2 returns it (`Conv.callAsFunction`).
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let t = cv1(x, ws)
        ws.observe(cv1.name, t)
        let out = cv2(t, into: y, residual: residual ? x : nil, ws)
        ws.release(t)
        return out
    }
}

/// Ultralytics `C3k`: cv3(cat(m(cv1(x)), cv2(x))) with `n` 3×3 bottlenecks (e = 1) on c2·e channels.
struct C3k: Sendable {
    let name: String
    let cv1: Conv, cv2: Conv, cv3: Conv
    let m: [Bottleneck]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int = 2, shortcut: Bool = true,
         e: Double = 0.5, k: Int = 3) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden)
        cv2 = try Conv(&w, p + ".cv2", c1, hidden)
        cv3 = try Conv(&w, p + ".cv3", 2 * hidden, c2)
        m = try (0..<n).map { try Bottleneck(&w, p + ".m.\($0)", hidden, hidden, shortcut: shortcut, k: k, e: 1) }
        name = p
    }

    var convs: [Conv] { [cv1, cv2, cv3] + m.flatMap(\.convs) }

    /// The blocks' last output and cv2(x) are written into the halves of cv3's input.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let hidden = cv1.channels
        let joined = ws.map(channels: 2 * hidden, like: x)
        var first = joined.channels(0..<hidden)
        if m.isEmpty {
            first = cv1(x, into: first, ws)
            ws.observe(cv1.name, first)
        } else {
            var a = cv1(x, ws)
            ws.observe(cv1.name, a)
            for (j, block) in m.enumerated() {
                let next = block(a, into: j == m.count - 1 ? first : ws.map(channels: hidden, like: x), ws)
                ws.observe(block.name, next)
                ws.release(a)
                a = next
            }
            first = a
        }
        let second = cv2(x, into: joined.channels(hidden..<(2 * hidden)), ws)
        ws.observe(cv2.name, second)
        let out = cv3(joined.bounded(by: .union(first.range, second.range)), into: y, ws)
        ws.release(joined)
        return out
    }
}

/// Ultralytics `C3k2` (a C2f whose blocks are Bottlenecks, C3k, or Bottleneck + PSABlock):
/// split cv1(x) into two halves, chain the blocks on the last piece, cv2 over all pieces.
struct C3k2: Layer {
    enum Block: Sendable {
        case bottleneck(Bottleneck)
        case c3k(C3k)
        /// `nn.Sequential(Bottleneck, PSABlock)` named `name`.
        case attention(Bottleneck, PSABlock, name: String)

        var name: String {
            switch self {
            case .bottleneck(let b): b.name
            case .c3k(let c): c.name
            case .attention(_, _, let name): name
            }
        }

        var convs: [Conv] {
            switch self {
            case .bottleneck(let b): b.convs
            case .c3k(let c): c.convs
            case .attention(let b, let psa, _): b.convs + psa.convs
            }
        }

        /// Returns `y` with its range as its last convolution measured it.
        func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
            switch self {
            case .bottleneck(let b): return b(x, into: y, ws)
            case .c3k(let c): return c(x, into: y, ws)
            case .attention(let b, let psa, _):
                let t = b(x, into: ws.map(channels: y.channels, like: y), ws)
                ws.observe(b.name, t)
                let out = psa(t, into: y, ws)
                ws.release(t)
                return out
            }
        }
    }

    static var repeatable: Bool { true }

    let cv1: Conv, cv2: Conv
    let hidden: Int
    let m: [Block]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int, c3k: Bool, e: Double,
         attention: Bool, shortcut: Bool = true) throws {
        hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, 2 * hidden)
        cv2 = try Conv(&w, p + ".cv2", (2 + n) * hidden, c2)
        let c = hidden
        m = try (0..<n).map { i in
            let q = p + ".m.\(i)"
            if attention {
                return .attention(try Bottleneck(&w, q + ".0", c, c, shortcut: shortcut),
                                  try PSABlock(&w, q + ".1", c, heads: max(c / 64, 1)), name: q)
            }
            return c3k ? .c3k(try C3k(&w, q, c, c, n: 2, shortcut: shortcut))
                : .bottleneck(try Bottleneck(&w, q, c, c, shortcut: shortcut))
        }
    }

    /// A `C3k2` row: [c2, c3k, e, attn, g, shortcut]; the m, l and x scales always use C3k.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let channels = try spec.outChannels()
        let c3k = ["m", "l", "x"].contains(spec.architecture.resolvedScale ?? "") ? true : try spec.bool(1, "c3k", default: false)
        guard try spec.int(4, "groups", default: 1) == 1 else { throw spec.fail("grouped C3k2 is not supported") }
        try self.init(&w, spec.prefix, spec.inputChannels[0], channels, n: spec.repeats, c3k: c3k,
                      e: try spec.double(2, "expansion", default: 0.5), attention: try spec.bool(3, "attn", default: false),
                      shortcut: try spec.bool(5, "shortcut", default: true))
    }

    var channels: Int { cv2.channels }
    var convs: [Conv] { [cv1, cv2] + m.flatMap(\.convs) }
    var parameterCount: Int { convs.parameterCount }
    var consumesInput: Bool { true }
    var hasAttention: Bool { m.contains { if case .attention = $0 { true } else { false } } }

    func flops(inputs: [Plane], output: Plane) -> Double {
        m.reduce(convs.flops(output)) { sum, block in
            guard case .attention(_, let psa, _) = block else { return sum }
            return sum + psa.attn.matmulFLOPs(positions: output.height * output.width)
        }
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

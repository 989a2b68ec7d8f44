import Tensor

/// Ultralytics `Bottleneck`: cv2(cv1(x)), plus x when `shortcut` and c1 == c2.
/// Hidden channels int(c2 · e); kernels (k, k).
struct Bottleneck: Sendable {
    let cv1: Conv, cv2: Conv
    let residual: Bool

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, shortcut: Bool = true, k: Int = 3,
         e: Double = 0.5) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, k: k)
        cv2 = try Conv(&w, p + ".cv2", hidden, c2, k: k)
        residual = shortcut && c1 == c2
    }

    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) {
        let t = cv1(x, ws)
        cv2(t, into: y, residual: residual ? x : nil, ws)
        ws.release(t)
    }
}

/// Ultralytics `C3k`: cv3(cat(m(cv1(x)), cv2(x))) with `n` 3×3 bottlenecks (e = 1) on c2·e channels.
struct C3k: Sendable {
    let cv1: Conv, cv2: Conv, cv3: Conv
    let m: [Bottleneck]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int = 2, shortcut: Bool = true,
         e: Double = 0.5, k: Int = 3) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden)
        cv2 = try Conv(&w, p + ".cv2", c1, hidden)
        cv3 = try Conv(&w, p + ".cv3", 2 * hidden, c2)
        m = try (0..<n).map { try Bottleneck(&w, p + ".m.\($0)", hidden, hidden, shortcut: shortcut, k: k, e: 1) }
    }

    /// The blocks' last output and cv2(x) are written into the halves of cv3's input.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) {
        let hidden = cv1.weight.shape[0]
        let joined = ws.map(channels: 2 * hidden, like: x), first = joined.channels(0..<hidden)
        if m.isEmpty {
            cv1(x, into: first, ws)
        } else {
            var a = cv1(x, ws)
            for (j, block) in m.enumerated() {
                let next = j == m.count - 1 ? first : ws.map(channels: hidden, like: x)
                block(a, into: next, ws)
                ws.release(a)
                a = next
            }
        }
        cv2(x, into: joined.channels(hidden..<(2 * hidden)), ws)
        cv3(joined, into: y, ws)
        ws.release(joined)
    }
}

/// Ultralytics `C3k2` (a C2f whose blocks are Bottlenecks, C3k, or Bottleneck + PSABlock):
/// split cv1(x) into two halves, chain the blocks on the last piece, cv2 over all pieces.
struct C3k2: Sendable {
    enum Block: Sendable {
        case bottleneck(Bottleneck)
        case c3k(C3k)
        case attention(Bottleneck, PSABlock)

        func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) {
            switch self {
            case .bottleneck(let b): b(x, into: y, ws)
            case .c3k(let c): c(x, into: y, ws)
            case .attention(let b, let psa):
                let t = ws.map(channels: y.channels, like: y)
                b(x, into: t, ws)
                psa(t, into: y, ws)
                ws.release(t)
            }
        }
    }

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
                                  try PSABlock(&w, q + ".1", c, heads: max(c / 64, 1)))
            }
            return c3k ? .c3k(try C3k(&w, q, c, c, n: 2, shortcut: shortcut))
                : .bottleneck(try Bottleneck(&w, q, c, c, shortcut: shortcut))
        }
    }

    /// cv1 writes the first two pieces of cv2's input, each block the next piece from the last.
    /// The output goes into `y` when given, else into a map of `ws` allocated once the blocks are
    /// done; x is released after cv1 when `consuming` (this is its last reader): yolo26n's
    /// largest moment, this block at 160×160, then holds its input, pieces and output at
    /// different times (3.3 + 6.6 MB less at once).
    func callAsFunction(_ x: Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let pieces = ws.map(channels: (2 + m.count) * hidden, like: x)
        cv1(x, into: pieces.channels(0..<(2 * hidden)), ws)
        if consuming { ws.release(x) }
        for (j, block) in m.enumerated() {
            block(pieces.channels((1 + j) * hidden..<((2 + j) * hidden)),
                  into: pieces.channels((2 + j) * hidden..<((3 + j) * hidden)), ws)
        }
        let out = y ?? cv2.output(pieces, ws)
        cv2(pieces, into: out, ws)
        ws.release(pieces)
        return out
    }
}

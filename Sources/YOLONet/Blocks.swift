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

    func callAsFunction(_ x: Tensor) -> Tensor {
        cv2(cv1(x), residual: residual ? x : nil)
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

    func callAsFunction(_ x: Tensor) -> Tensor {
        cv3(concat([m.reduce(cv1(x)) { $1($0) }, cv2(x)], axis: 1))
    }
}

/// Ultralytics `C3k2` (a C2f whose blocks are Bottlenecks, C3k, or Bottleneck + PSABlock):
/// split cv1(x) into two halves, chain the blocks on the last piece, cv2 over all pieces.
struct C3k2: Sendable {
    enum Block: Sendable {
        case bottleneck(Bottleneck)
        case c3k(C3k)
        case attention(Bottleneck, PSABlock)

        func callAsFunction(_ x: Tensor) -> Tensor {
            switch self {
            case .bottleneck(let b): b(x)
            case .c3k(let c): c(x)
            case .attention(let b, let psa): psa(b(x))
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

    /// cv1 writes into storage for every piece; each block's output is appended to it in place.
    /// `x` is let go once cv1 has read it: when the caller handed over the only reference, its
    /// storage is freed before the blocks and cv2 allocate theirs.
    func callAsFunction(_ x: consuming Tensor) -> Tensor {
        var pieces = cv1(x, reservingChannels: (2 + m.count) * hidden)
        _ = consume x
        var last = slice(pieces, hidden..<(2 * hidden), axis: 1)
        for block in m {
            last = block(last)
            pieces.append(last, axis: 1)
        }
        return cv2(pieces)
    }
}

/// Ultralytics `SPPF`: cv1, then `n` chained k×k stride-1 max pools, cv2 over the
/// concatenation, plus x when `shortcut` and c1 == c2. YOLO26 rows give n and shortcut and
/// leave cv1 unactivated; older rows (≤ 3 args after parsing) give cv1 SiLU.
struct SPPF: Sendable {
    let cv1: Conv, cv2: Conv
    let k: Int, n: Int
    let residual: Bool

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, k: Int, n: Int, shortcut: Bool,
         cv1Activation: Activation) throws {
        let hidden = c1 / 2
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, activation: cv1Activation)
        cv2 = try Conv(&w, p + ".cv2", hidden * (n + 1), c2)
        (self.k, self.n) = (k, n)
        residual = shortcut && c1 == c2
    }

    func callAsFunction(_ x: Tensor) -> Tensor {
        var pieces = [cv1(x)]
        for _ in 0..<n { pieces.append(maxPool2d(pieces[pieces.count - 1], kernel: k, stride: 1, padding: k / 2)) }
        return cv2(concat(pieces, axis: 1), residual: residual ? x : nil)
    }
}

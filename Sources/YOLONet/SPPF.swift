import Tensor

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

    /// cv1 and each pool write their piece of cv2's input.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) {
        let hidden = cv1.weight.shape[0]
        let pieces = ws.map(channels: (n + 1) * hidden, like: x)
        cv1(x, into: pieces.channels(0..<hidden), ws)
        for j in 0..<n {
            maxPool2d(pieces.channels(j * hidden..<((j + 1) * hidden)), kernel: k, stride: 1, padding: k / 2,
                      into: pieces.channels((j + 1) * hidden..<((j + 2) * hidden)), scratch: ws.scratch)
        }
        cv2(pieces, into: y, residual: residual ? x : nil, ws)
        ws.release(pieces)
    }
}

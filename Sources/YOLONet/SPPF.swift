import Tensor

/// Ultralytics `SPPF`: cv1, then `n` chained k×k stride-1 max pools, cv2 over the
/// concatenation, plus x when `shortcut` and c1 == c2. YOLO26 rows give n and shortcut and
/// leave cv1 unactivated; older rows (≤ 3 args after parsing) give cv1 SiLU.
struct SPPF: Layer {
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

    /// An `SPPF` row: [c2, k, n, shortcut]. Rows with ≤ 2 arguments predate YOLO26's
    /// unactivated cv1 (Ultralytics' rule).
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let channels = try spec.outChannels()
        let k = try spec.int(1, "kernel", default: 5, in: 1...63)
        guard k % 2 == 1 else { throw spec.fail("the SPPF pool kernel must be odd (it keeps the map size), got \(k)") }
        try self.init(&w, spec.prefix, spec.inputChannels[0], channels, k: k, n: try spec.int(2, "pools", default: 3, in: 1...16),
                      shortcut: try spec.bool(3, "shortcut", default: false), cv1Activation: spec.args.count <= 2 ? .silu : .none)
    }

    var channels: Int { cv2.channels }
    var parameterCount: Int { [cv1, cv2].parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { [cv1, cv2].flops(output) }

    /// cv1 and each pool write their piece of cv2's input.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let (x, y, hidden) = (input(0), y!, cv1.channels)
        let pieces = ws.map(channels: (n + 1) * hidden, like: x)
        let first = cv1(x, into: pieces.channels(0..<hidden), ws)
        ws.observe(cv1.name, first)
        for j in 0..<n {
            maxPool2d(pieces.channels(j * hidden..<((j + 1) * hidden)), kernel: k, stride: 1, padding: k / 2,
                      into: pieces.channels((j + 1) * hidden..<((j + 2) * hidden)), scratch: ws.scratch)
        }
        // A max pool's outputs are among its inputs, so cv1's range bounds all the pieces.
        let out = cv2(pieces.bounded(by: first.range), into: y, residual: residual ? x : nil, ws)
        ws.release(pieces)
        return out
    }
}

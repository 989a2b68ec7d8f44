import Tensor

/// Ultralytics `SPPF`, `SPP` and `SPPELAN`: cv1, stride-1 max pools of it (same size), cv2 over
/// the concatenation, plus x when `shortcut` and c1 == c2. x: [c1, H, W] → [c2, H, W].
/// - `SPPF`: `n` chained k×k pools. YOLO26 rows give n and shortcut and leave cv1 unactivated;
///   older rows (≤ 2 args) give cv1 the graph's activation.
/// - `SPP` (YOLOv3-spp): parallel pools of kernels k₁, k₂, … on cv1's output. Kernels k, 2k − 1,
///   3k − 2, … (the usual 5, 9, 13) run as SPPF's chain of k×k pools: a max pool of a max pool is
///   the max over the union window, so the result is the same, bit for bit, for less work.
/// - `SPPELAN` (YOLOv9): cv1 to c3 channels (not scaled), three chained k×k pools (`cv2`–`cv4`,
///   no weights), `cv5` over the four pieces.
struct SPPF: Layer {
    let cv1: Conv, cv2: Conv
    /// Each pool's kernel, and whether pool j reads pool j − 1's output (else cv1's).
    let kernels: [Int], chained: Bool
    let residual: Bool

    /// cv1 to `hidden` channels (c1 / 2 when nil), the pools, and the last conv `last` of prefix `p`.
    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, hidden: Int? = nil, kernels: [Int], chained: Bool,
         shortcut: Bool, cv1Activation: Activation, last: String = "cv2") throws {
        let hidden = hidden ?? c1 / 2
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, activation: cv1Activation)
        cv2 = try Conv(&w, p + "." + last, hidden * (kernels.count + 1), c2)
        (self.kernels, self.chained) = (kernels, chained)
        residual = shortcut && c1 == c2
    }

    /// An `SPPF` row: [c2, k, n, shortcut]. Rows with ≤ 2 arguments predate YOLO26's
    /// unactivated cv1 (Ultralytics' rule). An `SPP` row: [c2, [k₁, k₂, …]]. An `SPPELAN` row:
    /// [c2, c3, k].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        if spec.row.module == "SPPELAN" {
            guard spec.args.count <= 3 else { throw spec.fail("SPPELAN takes [c2, c3, k], got \(spec.args)") }
            let c3 = try spec.int(1, "c3"), k = try spec.int(2, "kernel", default: 5, in: 1...63)
            guard k % 2 == 1 else { throw spec.fail("the SPPELAN pool kernel must be odd (it keeps the map size), got \(k)") }
            try self.init(&w, spec.prefix, c1, c2, hidden: c3, kernels: [k, k, k], chained: true, shortcut: false,
                          cv1Activation: Conv.defaultActivation, last: "cv5")
            return
        }
        if spec.row.module == "SPP" {
            let given = try spec.kernels(1, "kernels", default: [5, 9, 13], count: 1...16)
            let chained = given.indices.allSatisfy { given[$0] == ($0 + 1) * (given[0] - 1) + 1 }
            try self.init(&w, spec.prefix, c1, c2, kernels: chained ? given.map { _ in given[0] } : given, chained: chained,
                          shortcut: false, cv1Activation: Conv.defaultActivation)
            return
        }
        let k = try spec.int(1, "kernel", default: 5, in: 1...63)
        guard k % 2 == 1 else { throw spec.fail("the SPPF pool kernel must be odd (it keeps the map size), got \(k)") }
        try self.init(&w, spec.prefix, c1, c2, kernels: Array(repeating: k, count: try spec.int(2, "pools", default: 3, in: 1...16)),
                      chained: true, shortcut: try spec.bool(3, "shortcut", default: false),
                      cv1Activation: spec.args.count <= 2 ? Conv.defaultActivation : .none)
    }

    var channels: Int { cv2.channels }
    var parameterCount: Int { [cv1, cv2].parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { [cv1, cv2].flops(output) }

    /// cv1 and each pool write their piece of cv2's input.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let (x, y, hidden) = (input(0), y!, cv1.channels)
        let pieces = ws.map(channels: (kernels.count + 1) * hidden, like: x)
        let first = cv1(x, into: pieces.channels(0..<hidden), ws)
        ws.observe(cv1.name, first)
        for (j, k) in kernels.enumerated() {
            let source = chained ? j : 0
            maxPool2d(pieces.channels(source * hidden..<((source + 1) * hidden)), kernel: k, stride: 1, padding: k / 2,
                      into: pieces.channels((j + 1) * hidden..<((j + 2) * hidden)), scratch: ws.scratch)
        }
        // A max pool's outputs are among its inputs, so cv1's range bounds all the pieces.
        let out = cv2(pieces.bounded(by: first.range), into: y, residual: residual ? x : nil, ws)
        ws.release(pieces)
        return out
    }
}

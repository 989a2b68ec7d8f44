import Tensor

/// Ultralytics `SPPELAN` (YOLOv9): cv1 to c3 channels, three chained k×k stride-1 max pools
/// (`cv2`–`cv4`, no weights), `cv5` over the four pieces. x: [c1, H, W] → [c2, H, W].
struct SPPELAN: Layer {
    let cv1: Conv, cv5: Conv
    let k: Int

    /// An `SPPELAN` row: [c2, c3, k]; c3 is not scaled.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count <= 3 else { throw spec.fail("SPPELAN takes [c2, c3, k], got \(spec.args)") }
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let c3 = try spec.int(1, "c3")
        k = try spec.int(2, "kernel", default: 5, in: 1...63)
        guard k % 2 == 1 else { throw spec.fail("the SPPELAN pool kernel must be odd (it keeps the map size), got \(k)") }
        cv1 = try Conv(&w, spec.prefix + ".cv1", c1, c3)
        cv5 = try Conv(&w, spec.prefix + ".cv5", 4 * c3, c2)
    }

    var channels: Int { cv5.channels }
    var parameterCount: Int { [cv1, cv5].parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { [cv1, cv5].flops(output) }

    /// cv1 and each pool write their piece of cv5's input (as `SPPF`).
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let hidden = cv1.channels
        let pieces = ws.map(channels: 4 * hidden, like: input(0))
        let first = cv1(input(0), into: pieces.channels(0..<hidden), ws)
        ws.observe(cv1.name, first)
        for j in 0..<3 {
            maxPool2d(pieces.channels(j * hidden..<((j + 1) * hidden)), kernel: k, stride: 1, padding: k / 2,
                      into: pieces.channels((j + 1) * hidden..<((j + 2) * hidden)), scratch: ws.scratch)
        }
        // A max pool's outputs are among its inputs, so cv1's range bounds all the pieces.
        let out = cv5(pieces.bounded(by: first.range), into: y!, ws)
        ws.release(pieces)
        return out
    }
}

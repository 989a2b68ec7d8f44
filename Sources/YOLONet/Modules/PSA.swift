import Tensor

/// Ultralytics `PSA` (YOLOv10): cv1 splits into (a, b), b runs through one PSABlock whose
/// `attn` and `ffn` sit at the module's own prefix, cv2 joins. A `C2PSA` of one block, without
/// the block's `m.0` level. x: [c, H, W] → [c, H, W].
struct PSA: Layer {
    let cv1: Conv, cv2: Conv
    let block: PSABlock

    /// A `PSA` row: [c2, e]; c2 must equal the input channels.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        guard c1 == c2 else { throw spec.fail("PSA needs c1 == c2, got \(c1), \(c2)") }
        let c = Int(Double(c1) * (try spec.double(1, "expansion", default: 0.5)))
        cv1 = try Conv(&w, spec.prefix + ".cv1", c1, 2 * c)
        cv2 = try Conv(&w, spec.prefix + ".cv2", 2 * c, c1)
        block = try PSABlock(&w, spec.prefix, c, heads: max(c / 64, 1))
    }

    var channels: Int { cv2.channels }
    var convs: [Conv] { [cv1, cv2] + block.convs }
    var parameterCount: Int { convs.parameterCount }
    var hasAttention: Bool { true }

    func flops(inputs: [Plane], output: Plane) -> Double {
        convs.flops(output) + block.attn.matmulFLOPs(positions: output.height * output.width)
    }

    /// The block runs in place on the second half of cv1's output, which is cv2's input.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let ab = cv1(input(0), ws)
        ws.observe(cv1.name, ab)
        // The block rewrites b in place: cv1's range still bounds a, the block's bounds b.
        let half = ab.channels((cv1.channels / 2)..<cv1.channels)
        let b = block(half.bounded(by: ab.range), into: half, ws)
        let out = cv2(ab.bounded(by: .union(ab.range, b.range)), into: y!, ws)
        ws.release(ab)
        return out
    }
}

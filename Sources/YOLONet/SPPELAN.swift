import Tensor

/// Ultralytics `SPPELAN` (YOLOv9): cv1 to c3 channels, three chained k×k stride-1 max pools
/// (`cv2`–`cv4`, no weights), `cv5` over the four pieces: an `SPPF` of three pools with its
/// own names and widths. x: [c1, H, W] → [c2, H, W].
struct SPPELAN: Layer {
    let pools: SPPF

    /// An `SPPELAN` row: [c2, c3, k]; c3 is not scaled.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count <= 3 else { throw spec.fail("SPPELAN takes [c2, c3, k], got \(spec.args)") }
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let c3 = try spec.int(1, "c3"), k = try spec.int(2, "kernel", default: 5, in: 1...63)
        guard k % 2 == 1 else { throw spec.fail("the SPPELAN pool kernel must be odd (it keeps the map size), got \(k)") }
        pools = try SPPF(sppelan: &w, spec.prefix, c1, c2, c3: c3, k: k)
    }

    var channels: Int { pools.channels }
    var parameterCount: Int { pools.parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { pools.flops(inputs: inputs, output: output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        pools.forward(input, into: y, consuming: consuming, ws)
    }
}

extension SPPF {
    init(sppelan w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, c3: Int, k: Int) throws {
        cv1 = try Conv(&w, p + ".cv1", c1, c3)
        cv2 = try Conv(&w, p + ".cv5", 4 * c3, c2)
        (self.k, n, residual) = (k, 3, false)
    }
}

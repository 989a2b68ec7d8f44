import Tensor

/// Ultralytics `Proto`: Conv 3×3, a 2×2 stride-2 transposed conv with bias, Conv 3×3, Conv 1×1
/// → `masks` prototypes. x: [c1, H, W] → [masks, 2H, 2W]. The legacy `Segment` head runs it on
/// its first level (prototypes at 1/4 of the input); `Proto26` on its fused levels.
struct Proto: Sendable {
    let cv1: Conv, cv2: Conv, cv3: Conv
    let upsampleWeight: Tensor, upsampleBias: [Float]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, hidden: Int, masks: Int) throws {
        // The transposed convolution runs on OpenBLAS: a missing library is an error here, not
        // a crash at the first inference.
        try BLAS.load()
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, k: 3)
        upsampleWeight = try w.tensor(p + ".upsample.weight", shape: [hidden, hidden, 2, 2])
        upsampleBias = try w.tensor(p + ".upsample.bias", shape: [hidden]).scalars
        cv2 = try Conv(&w, p + ".cv2", hidden, hidden, k: 3)
        cv3 = try Conv(&w, p + ".cv3", hidden, masks)
    }

    var parameterCount: Int { [cv1, cv2, cv3].parameterCount + upsampleWeight.count + upsampleBias.count }

    /// FLOPs on an input of the given plane: the result is twice its size.
    func flops(_ plane: Plane) -> Double {
        let (h, w) = plane
        return cv1.flops(plane) + 2 * Double(upsampleWeight.count * h * w) + [cv2, cv3].flops((2 * h, 2 * w))
    }

    /// x [c1, H, W] → [masks, 2H, 2W] in a result map of `ws` (`Workspace.result`). With
    /// `consuming`, x is released once read.
    func callAsFunction(_ x: Map, consuming: Bool = false, _ ws: Workspace) -> Map {
        let c1 = cv1(x, ws)
        if consuming { ws.release(x) }
        let upsampled = ws.map(channels: c1.channels, height: 2 * c1.height, width: 2 * c1.width)
        convTranspose2d(c1, weight: upsampleWeight, bias: upsampleBias, stride: 2, padding: 0, into: upsampled,
                        scratch: ws.scratch)
        ws.release(c1)
        let c2 = cv2(upsampled, ws)
        ws.release(upsampled)
        let out = ws.result(channels: cv3.channels, height: c2.height, width: c2.width)
        cv3(c2, into: out, ws)
        ws.release(c2)
        return out
    }
}

/// How a segment head makes its prototypes from its input levels: `Proto` on the first level
/// (`Segment`) or `Proto26` on all of them (`Segment26`).
protocol PrototypeBranch: Sendable {
    var parameterCount: Int { get }
    /// FLOPs on the head's input levels of the given planes.
    func flops(_ levels: [Plane]) -> Double
    /// feature(i): the head's input level i → [masks, 2·H₀, 2·W₀] in a result map of `ws`.
    func callAsFunction(_ feature: (Int) -> Map, _ ws: Workspace) -> Map
}

extension Proto: PrototypeBranch {
    func flops(_ levels: [Plane]) -> Double { flops(levels[0]) }
    func callAsFunction(_ feature: (Int) -> Map, _ ws: Workspace) -> Map { self(feature(0), ws) }
}

import Tensor

/// Ultralytics `Proto26`: the deeper levels refined to the first level's channels (1×1),
/// upsampled (nearest) and added to it, fused (3×3), then `Proto`: Conv 3×3, a 2×2 stride-2
/// transposed conv, Conv 3×3, Conv 1×1 → `masks` prototypes at 1/4 of the input size.
/// The semantic-segmentation branch only trains.
struct Proto26: Sendable {
    let refine: [Conv]
    let fuse: Conv, cv1: Conv, cv2: Conv, cv3: Conv
    let upsampleWeight: Tensor, upsampleBias: [Float]

    init(_ w: inout some WeightSource, _ p: String, channels: [Int], hidden: Int, masks: Int) throws {
        // The transposed convolution runs on OpenBLAS: a missing library is an error here, not
        // a crash at the first inference.
        try BLAS.load()
        refine = try channels.dropFirst().enumerated().map { try Conv(&w, "\(p).feat_refine.\($0)", $1, channels[0]) }
        fuse = try Conv(&w, p + ".feat_fuse", channels[0], hidden, k: 3)
        cv1 = try Conv(&w, p + ".cv1", hidden, hidden, k: 3)
        upsampleWeight = try w.tensor(p + ".upsample.weight", shape: [hidden, hidden, 2, 2])
        upsampleBias = try w.tensor(p + ".upsample.bias", shape: [hidden]).scalars
        cv2 = try Conv(&w, p + ".cv2", hidden, hidden, k: 3)
        cv3 = try Conv(&w, p + ".cv3", hidden, masks)
        w.discard(prefix: p + ".semseg")
    }

    var parameterCount: Int {
        (refine + [fuse, cv1, cv2, cv3]).parameterCount + upsampleWeight.count + upsampleBias.count
    }

    /// FLOPs on the head's input levels of the given planes: the result is twice level 0's size.
    func flops(_ levels: [Plane]) -> Double {
        let (h, w) = levels[0]
        let refined = refine.indices.reduce(0.0) { $0 + refine[$1].flops(levels[$1 + 1]) }
        let upsample = 2 * Double(upsampleWeight.count * h * w)
        return refined + upsample + [fuse, cv1].flops((h, w)) + [cv2, cv3].flops((2 * h, 2 * w))
    }

    /// feature(i): the head's input level i → [masks, 2·H₀, 2·W₀] in a buffer of `ws`.
    func callAsFunction(_ feature: (Int) -> Map, _ ws: Workspace) -> Map {
        let first = feature(0)
        let feat = ws.map(channels: first.channels, like: first), up = ws.map(channels: first.channels, like: first)
        first.write(to: feat)
        for (i, conv) in refine.enumerated() {
            let refined = conv(feature(i + 1), ws)
            upsampleNearest(refined, scale: 1 << (i + 1), into: up)
            addVectors(feat.base, up.base, into: feat.base, count: feat.count)
            ws.release(refined)
        }
        ws.release(up)
        let fused = fuse(feat, ws)
        ws.release(feat)
        let c1 = cv1(fused, ws)
        ws.release(fused)
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

import Tensor

/// Ultralytics `Proto26`: the deeper levels refined to the first level's channels (1×1),
/// upsampled (nearest) and added to it, fused (3×3), then `Proto` → `masks` prototypes at
/// twice the first level's size. The semantic-segmentation branch only trains.
struct Proto26: PrototypeBranch {
    let refine: [Conv]
    let fuse: Conv
    let proto: Proto

    init(_ w: inout some WeightSource, _ p: String, channels: [Int], hidden: Int, masks: Int) throws {
        refine = try channels.dropFirst().enumerated().map { try Conv(&w, "\(p).feat_refine.\($0)", $1, channels[0]) }
        fuse = try Conv(&w, p + ".feat_fuse", channels[0], hidden, k: 3)
        proto = try Proto(&w, p, hidden, hidden: hidden, masks: masks)
        w.discard(prefix: p + ".semseg")
    }

    var parameterCount: Int { (refine + [fuse]).parameterCount + proto.parameterCount }

    func flops(_ levels: [Plane]) -> Double {
        let refined = refine.indices.reduce(0.0) { $0 + refine[$1].flops(levels[$1 + 1]) }
        return refined + fuse.flops(levels[0]) + proto.flops(levels[0])
    }

    /// Level i + 1 is upsampled by 2^(i + 1): `Detect` checks that the levels' strides double.
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
        return proto(fused, consuming: true, ws)
    }
}

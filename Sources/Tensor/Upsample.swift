/// Nearest-neighbour upsampling by an integer factor, as `nn.Upsample(scale_factor=s, mode="nearest")`.
/// x: [N, C, H, W] → [N, C, H·s, W·s]; output (y, x) reads input (y / s, x / s).
/// `reservingChannels`: storage for that many output channels, for `append` to fill in place.
public func upsampleNearest(_ x: Tensor, scale: Int, reservingChannels: Int = 0) -> Tensor {
    precondition(x.rank == 4 && scale >= 1, "upsampleNearest: x \(x.shape), scale \(scale)")
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let wo = w * scale
    let parts = Parallel.ranges(n * c * h, parts: n * c * h * wo >= 1 << 15 ? Parallel.width : 1)
    return Tensor(shape: [n, c, h * scale, wo], capacity: n * reservingChannels * h * scale * wo) { yb in
        x.scalars.withUnsafeBufferPointer { xb in
            let (xa, ya) = (Address(xb.baseAddress!), Address(yb.baseAddress!))
            Parallel.forEach(parts.count) { t in
                for row in parts[t] {
                    let src = xa.pointer + row * w, dst = ya.pointer + row * wo * scale
                    for ix in 0..<w {
                        (dst + ix * scale).initialize(repeating: src[ix], count: scale)
                    }
                    for r in 1..<scale { (dst + r * wo).update(from: dst, count: wo) }
                }
            }
        }
    }
}

extension Reference {
    public static func upsampleNearest(_ x: Tensor, scale: Int) -> Tensor {
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        var y = Tensor(zeros: [n, c, h * scale, w * scale])
        for b in 0..<n {
            for ch in 0..<c {
                for oy in 0..<(h * scale) {
                    for ox in 0..<(w * scale) { y[b, ch, oy, ox] = x[b, ch, oy / scale, ox / scale] }
                }
            }
        }
        return y
    }
}

/// Nearest-neighbour upsampling by an integer factor, as `nn.Upsample(scale_factor=s, mode="nearest")`.
/// x: [N, C, H, W] → [N, C, H·s, W·s]; output (y, x) reads input (y / s, x / s).
public func upsampleNearest(_ x: Tensor, scale: Int) -> Tensor {
    precondition(x.rank == 4 && scale >= 1, "upsampleNearest: x \(x.shape), scale \(scale)")
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    return Tensor(shape: [n, c, h * scale, w * scale]) { yb in
        for image in 0..<n {
            x.withMap(image: image) {
                upsampleNearest($0, scale: scale, into: Map(yb.baseAddress! + image * c * h * w * scale * scale,
                                                            channels: c, height: h * scale, width: w * scale))
            }
        }
    }
}

/// One image: x [C, H, W] → y [C, H·s, W·s].
package func upsampleNearest(_ x: Map, scale: Int, into y: Map) {
    precondition(scale >= 1 && y.channels == x.channels && y.height == x.height * scale && y.width == x.width * scale,
                 "upsampleNearest: \(x.channels)×\(x.height)×\(x.width) by \(scale) into \(y.channels)×\(y.height)×\(y.width)")
    let (rows, w) = (x.channels * x.height, x.width)
    let parts = Parallel.ranges(rows, parts: y.count >= 1 << 15 ? Parallel.width : 1)
    Parallel.forEach(parts.count, UpsampleRows(x: Address(x.base), y: Address(y.base), parts: parts, w: w, scale: scale))
}

/// `upsampleNearest`'s part: a range of input rows (over all channels).
private struct UpsampleRows: ParallelWork {
    let x: Address<Float>, y: Address<Float>
    let parts: Partition
    let w: Int, scale: Int

    func run(part t: Int, thread _: Int) {
        let wo = w * scale
        for row in parts[t] {
            let src = x.pointer + row * w, dst = y.pointer + row * wo * scale
            var ix = 0
            if scale == 2 {
                // 8 floats each twice, interleaved by one permute (not one at a time; as
                // zero-extended 64-bit lanes, the conversion stays a call a vector).
                while ix + 8 <= w {
                    let v: Vec8 = src.vector(ix)
                    var pairs = Vec16()
                    (pairs.evenHalf, pairs.oddHalf) = (v, v)
                    dst.store(pairs, at: 2 * ix)
                    ix += 8
                }
            }
            while ix < w {
                (dst + ix * scale).initialize(repeating: src[ix], count: scale)
                ix += 1
            }
            for r in 1..<scale { (dst + r * wo).update(from: dst, count: wo) }
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

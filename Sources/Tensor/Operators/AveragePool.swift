/// Average pooling with stride 1 and no padding, as PyTorch's `avg_pool2d(x, k, 1, 0)`
/// (YOLOv9's `AConv` and `ADown` take k = 2 before their stride-2 convolutions).
/// x: [N, C, H, W] → [N, C, H − k + 1, W − k + 1].
///
/// Each output sums its window row by row, left to right, then divides by k², as PyTorch's CPU
/// kernel does: the same floats in the same order, so the same result. 16 outputs of a row at a time.
public func avgPool2d(_ x: Tensor, kernel: Int) -> Tensor {
    precondition(x.rank == 4 && kernel > 0 && x.shape[2] >= kernel && x.shape[3] >= kernel,
                 "avgPool2d: x \(x.shape), kernel \(kernel)")
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let (ho, wo) = (h - kernel + 1, w - kernel + 1)
    return Tensor(shape: [n, c, ho, wo]) { yb in
        for image in 0..<n {
            x.withMap(image: image) {
                avgPool2d($0, kernel: kernel, into: Map(yb.baseAddress! + image * c * ho * wo, channels: c, height: ho, width: wo))
            }
        }
    }
}

/// One image: x [C, H, W] → y [C, H − k + 1, W − k + 1].
package func avgPool2d(_ x: Map, kernel: Int, into y: Map) {
    precondition(kernel > 0 && y.channels == x.channels && y.height == x.height - kernel + 1 && y.width == x.width - kernel + 1
                 && y.height > 0 && y.width > 0,
                 "avgPool2d: \(x.channels)×\(x.height)×\(x.width), kernel \(kernel) into \(y.channels)×\(y.height)×\(y.width)")
    let rows = y.channels * y.height
    let parts = Parallel.ranges(rows, parts: y.count >= 1 << 15 ? Parallel.width : 1)
    Parallel.forEach(parts.count, AveragedRows(x: Address(x.base), y: Address(y.base), parts: parts, h: x.height, w: x.width,
                                               kernel: kernel))
}

/// `avgPool2d`'s part: a range of output rows (over all channels).
private struct AveragedRows: ParallelWork {
    let x: Address<Float>, y: Address<Float>
    let parts: Partition
    let h: Int, w: Int, kernel: Int

    func run(part t: Int, thread _: Int) {
        let (ho, wo, area) = (h - kernel + 1, w - kernel + 1, Float(kernel * kernel))
        for row in parts[t] {
            let (plane, oy) = row.quotientAndRemainder(dividingBy: ho)
            let src = UnsafePointer(x.pointer + plane * h * w + oy * w), dst = y.pointer + row * wo
            var ox = 0
            while ox + 16 <= wo {
                var sum = Vec16()
                for ky in 0..<kernel {
                    for kx in 0..<kernel { sum += src.vec16(ky * w + ox + kx) }
                }
                dst.store(sum / area, at: ox)
                ox += 16
            }
            while ox < wo {
                var sum: Float = 0
                for ky in 0..<kernel {
                    for kx in 0..<kernel { sum += src[ky * w + ox + kx] }
                }
                dst[ox] = sum / area
                ox += 1
            }
        }
    }
}

extension Reference {
    public static func avgPool2d(_ x: Tensor, kernel: Int) -> Tensor {
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        var y = Tensor(zeros: [n, c, h - kernel + 1, w - kernel + 1])
        for b in 0..<n {
            for ch in 0..<c {
                for oy in 0...(h - kernel) {
                    for ox in 0...(w - kernel) {
                        var sum: Double = 0
                        for ky in 0..<kernel {
                            for kx in 0..<kernel { sum += Double(x[b, ch, oy + ky, ox + kx]) }
                        }
                        y[b, ch, oy, ox] = Float(sum / Double(kernel * kernel))
                    }
                }
            }
        }
        return y
    }
}

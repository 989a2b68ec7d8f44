/// Max pooling with -∞ padding, as PyTorch's `MaxPool2d`.
/// x: [N, C, H, W] → [N, C, Ho, Wo] with Ho = (H + 2·padding − kernel) / stride + 1.
///
/// Stride 1 (SPPF's 5/1/2) uses separability: a horizontal max over the padded plane, then a
/// vertical max, 16 lanes at a time. 2×2 windows of stride 2 (YOLOv3-tiny's downsampling) take
/// the max of two rows, then of each even and odd lane, 8 outputs at a time. Max is exact, so
/// the result equals the direct window scan bit for bit. Other strides scan each window directly.
public func maxPool2d(_ x: Tensor, kernel: Int, stride: Int, padding: Int) -> Tensor {
    precondition(x.rank == 4 && kernel > 0 && stride > 0 && padding >= 0 && padding * 2 <= kernel,
                 "maxPool2d: x \(x.shape), kernel \(kernel), stride \(stride), padding \(padding)")
    let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let ho = (h + 2 * padding - kernel) / stride + 1, wo = (w + 2 * padding - kernel) / stride + 1
    precondition(ho > 0 && wo > 0, "maxPool2d: input \(h)×\(w) is smaller than the kernel")
    let scratch = Scratch()
    return Tensor(shape: [n, c, ho, wo]) { yb in
        for image in 0..<n {
            x.withMap(image: image) {
                maxPool2d($0, kernel: kernel, stride: stride, padding: padding,
                          into: Map(yb.baseAddress! + image * c * ho * wo, channels: c, height: ho, width: wo), scratch: scratch)
            }
        }
    }
}

/// One image: x [C, H, W] → y [C, Ho, Wo].
package func maxPool2d(_ x: Map, kernel: Int, stride: Int, padding: Int, into y: Map, scratch: Scratch) {
    let (c, h, w) = (x.channels, x.height, x.width)
    let ho = (h + 2 * padding - kernel) / stride + 1, wo = (w + 2 * padding - kernel) / stride + 1
    precondition(kernel > 0 && stride > 0 && padding >= 0 && padding * 2 <= kernel && ho > 0 && wo > 0
                 && y.channels == c && y.height == ho && y.width == wo,
                 "maxPool2d: \(c)×\(h)×\(w), kernel \(kernel), stride \(stride), padding \(padding) into \(y.channels)×\(y.height)×\(y.width)")
    let planes = Parallel.ranges(c, parts: Parallel.width)
    // Per part, the padded plane and its row maxima (stride 1).
    let (buffers, _) = scratch.take(floats: stride == 1 ? planes.count * 2 * (h + 2 * padding) * (w + 2 * padding) : 0)
    Parallel.forEach(planes.count, PoolPlanes(x: Address(x.base), y: Address(y.base), scratch: Address(buffers),
                                              planes: planes, h: h, w: w, ho: ho, wo: wo, kernel: kernel,
                                              stride: stride, padding: padding))
}

/// `maxPool2d`'s part: a range of channel planes, with its share of the scratch (stride 1).
private struct PoolPlanes: ParallelWork {
    let x: Address<Float>, y: Address<Float>, scratch: Address<Float>
    let planes: Partition
    let h: Int, w: Int, ho: Int, wo: Int, kernel: Int, stride: Int, padding: Int

    func run(part: Int, thread _: Int) {
        let (pw, ph) = (w + 2 * padding, h + 2 * padding)
        let xp = x.pointer, yp = y.pointer
        if stride == 1 {
            // The plane padded with −∞ on every side, flattened: a window's row is `kernel`
            // consecutive floats and its column `kernel` floats a padded row apart, so both
            // passes run 16 flat positions at a time; positions past a row's last output
            // mix two rows and are never read back.
            let padded = scratch.pointer + part * 2 * ph * pw, rows = padded + ph * pw
            padded.initialize(repeating: -.infinity, count: 2 * ph * pw)
            for plane in planes[part] {
                let src = xp + plane * h * w, dst = yp + plane * ho * wo
                for iy in 0..<h { (padded + (iy + padding) * pw + padding).update(from: src + iy * w, count: w) }
                maxOfShifted(UnsafePointer(padded), step: 1, taps: kernel, into: rows, count: ph * pw - kernel + 1)
                maxOfShifted(UnsafePointer(rows), step: pw, taps: kernel, into: padded, count: ho * pw)
                for oy in 0..<ho { (dst + oy * wo).update(from: padded + oy * pw, count: wo) }
                // The next plane's fill overwrites only the interior: restore the −∞ frame.
                padded.update(repeating: -.infinity, count: ho * pw)
            }
        } else if kernel == 2 && stride == 2 && padding == 0 {
            for plane in planes[part] {
                let src = UnsafePointer(xp + plane * h * w), dst = yp + plane * ho * wo
                for oy in 0..<ho {
                    let (top, bottom, out) = (src + 2 * oy * w, src + (2 * oy + 1) * w, dst + oy * wo)
                    var ox = 0
                    // 16 inputs of each row, 2·ox + 16 ≤ 2·wo ≤ w.
                    while ox + 8 <= wo {
                        let m = top.vec16(2 * ox).maximum(bottom.vec16(2 * ox))
                        out.store(m.evenHalf.maximum(m.oddHalf), at: ox)
                        ox += 8
                    }
                    while ox < wo {
                        out[ox] = max(max(top[2 * ox], top[2 * ox + 1]), max(bottom[2 * ox], bottom[2 * ox + 1]))
                        ox += 1
                    }
                }
            }
        } else {
            for plane in planes[part] {
                let src = xp + plane * h * w, dst = yp + plane * ho * wo
                for oy in 0..<ho {
                    for ox in 0..<wo {
                        var m = -Float.infinity
                        for ky in 0..<kernel {
                            let iy = oy * stride - padding + ky
                            guard iy >= 0 && iy < h else { continue }
                            for kx in 0..<kernel {
                                let ix = ox * stride - padding + kx
                                if ix >= 0 && ix < w { m = max(m, src[iy * w + ix]) }
                            }
                        }
                        dst[oy * wo + ox] = m
                    }
                }
            }
        }
    }
}

/// out[i] = max over t < taps of src[i + t·step], for i < count.
@inline(__always)
private func maxOfShifted(_ src: UnsafePointer<Float>, step: Int, taps: Int,
                          into out: UnsafeMutablePointer<Float>, count: Int) {
    var i = 0
    while i + 16 <= count {
        var m = src.vec16(i)
        for t in 1..<max(taps, 1) { m = m.maximum(src.vec16(i + t * step)) }
        out.store(m, at: i)
        i += 16
    }
    while i < count {
        var m = src[i]
        for t in 1..<max(taps, 1) { m = max(m, src[i + t * step]) }
        out[i] = m
        i += 1
    }
}

extension Reference {
    public static func maxPool2d(_ x: Tensor, kernel: Int, stride: Int, padding: Int) -> Tensor {
        let (n, c, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let ho = (h + 2 * padding - kernel) / stride + 1, wo = (w + 2 * padding - kernel) / stride + 1
        var y = Tensor(zeros: [n, c, ho, wo])
        for b in 0..<n {
            for ch in 0..<c {
                for oy in 0..<ho {
                    for ox in 0..<wo {
                        var m = -Float.infinity
                        for ky in 0..<kernel {
                            for kx in 0..<kernel {
                                let iy = oy * stride - padding + ky, ix = ox * stride - padding + kx
                                if iy >= 0 && iy < h && ix >= 0 && ix < w { m = max(m, x[b, ch, iy, ix]) }
                            }
                        }
                        y[b, ch, oy, ox] = m
                    }
                }
            }
        }
        return y
    }
}

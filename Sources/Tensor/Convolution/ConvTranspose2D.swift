/// Transposed 2-D convolution (groups 1), as `nn.ConvTranspose2d(c1, c2, k, stride, padding)`.
///
/// - x: [N, Cin, H, W]; weight: [Cin, Cout, kH, kW]; bias: [Cout] or nil.
/// - Returns [N, Cout, (H − 1)·stride − 2·padding + kH, (W − 1)·stride − 2·padding + kW].
///
/// One GEMM gives every input pixel's contribution to every output tap,
/// cols [Cout·kH·kW, H·W] = weightᵀ · x, then col2im adds the taps into place.
public func convTranspose2d(_ x: Tensor, weight: Tensor, bias: [Float]?, stride: Int, padding: Int) -> Tensor {
    precondition(x.rank == 4 && weight.rank == 4 && weight.shape[0] == x.shape[1] && stride > 0 && padding >= 0,
                 "convTranspose2d: x \(x.shape), weight \(weight.shape), stride \(stride), padding \(padding)")
    let (n, h, w) = (x.shape[0], x.shape[2], x.shape[3])
    let (cout, kh, kw) = (weight.shape[1], weight.shape[2], weight.shape[3])
    precondition(bias == nil || bias!.count == cout, "convTranspose2d: bias has \(bias!.count) values for \(cout) channels")
    let ho = (h - 1) * stride - 2 * padding + kh, wo = (w - 1) * stride - 2 * padding + kw
    precondition(ho > 0 && wo > 0, "convTranspose2d: padding \(padding) leaves no output")
    let scratch = Scratch(), biases = bias ?? [Float](repeating: 0, count: cout)
    return Tensor(shape: [n, cout, ho, wo]) { yb in
        for image in 0..<n {
            x.withMap(image: image) {
                convTranspose2d($0, weight: weight, bias: biases, stride: stride, padding: padding,
                                into: Map(yb.baseAddress! + image * cout * ho * wo, channels: cout, height: ho, width: wo),
                                scratch: scratch)
            }
        }
    }
}

/// One image: x [Cin, H, W] → y [Cout, Ho, Wo].
package func convTranspose2d(_ x: Map, weight: Tensor, bias: [Float], stride: Int, padding: Int, into y: Map,
                             scratch: Scratch) {
    let (cin, h, w) = (x.channels, x.height, x.width)
    let (cout, kh, kw) = (weight.shape[1], weight.shape[2], weight.shape[3])
    let (ho, wo) = (y.height, y.width)
    precondition(weight.shape[0] == cin && bias.count == cout && y.channels == cout
                 && ho == (h - 1) * stride - 2 * padding + kh && wo == (w - 1) * stride - 2 * padding + kw,
                 "convTranspose2d: \(cin)×\(h)×\(w), weight \(weight.shape), stride \(stride), padding \(padding) into \(y.channels)×\(ho)×\(wo)")
    let rows = cout * kh * kw, plane = h * w
    let (cols, _) = scratch.take(floats: rows * plane)
    weight.scalars.withUnsafeBufferPointer { wb in
        BLAS.sgemm(transA: true, m: rows, n: plane, k: cin, a: wb.baseAddress!, lda: rows, b: x.base, ldb: plane,
                   c: cols, ldc: plane)
    }
    for oc in 0..<cout {
        let o = y.base + oc * ho * wo
        o.initialize(repeating: bias[oc], count: ho * wo)
        for ky in 0..<kh {
            for kx in 0..<kw {
                let row = cols + ((oc * kh + ky) * kw + kx) * plane
                for iy in 0..<h {
                    let oy = iy * stride - padding + ky
                    guard oy >= 0 && oy < ho else { continue }
                    for ix in 0..<w {
                        let ox = ix * stride - padding + kx
                        if ox >= 0 && ox < wo { o[oy * wo + ox] += row[iy * w + ix] }
                    }
                }
            }
        }
    }
}

extension Reference {
    /// Scatter form with Double accumulation: each input pixel adds weight · value to the
    /// output window it maps to.
    public static func convTranspose2d(_ x: Tensor, weight: Tensor, bias: [Float]?, stride: Int, padding: Int) -> Tensor {
        let (n, cin, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let (cout, kh, kw) = (weight.shape[1], weight.shape[2], weight.shape[3])
        let ho = (h - 1) * stride - 2 * padding + kh, wo = (w - 1) * stride - 2 * padding + kw
        var acc = [Double](repeating: 0, count: n * cout * ho * wo)
        for b in 0..<n {
            for oc in 0..<cout {
                for i in 0..<(ho * wo) { acc[(b * cout + oc) * ho * wo + i] = Double(bias?[oc] ?? 0) }
                for ic in 0..<cin {
                    for iy in 0..<h {
                        for ix in 0..<w {
                            let v = Double(x.scalars[((b * cin + ic) * h + iy) * w + ix])
                            for ky in 0..<kh {
                                for kx in 0..<kw {
                                    let oy = iy * stride - padding + ky, ox = ix * stride - padding + kx
                                    guard oy >= 0 && oy < ho && ox >= 0 && ox < wo else { continue }
                                    acc[((b * cout + oc) * ho + oy) * wo + ox] +=
                                        v * Double(weight.scalars[((ic * cout + oc) * kh + ky) * kw + kx])
                                }
                            }
                        }
                    }
                }
            }
        }
        return Tensor(shape: [n, cout, ho, wo], scalars: acc.map(Float.init))
    }
}

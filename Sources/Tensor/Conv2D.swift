import Foundation

/// Geometry of a 2-D convolution. Weight shape is [Cout, Cin / groups, kernelH, kernelW].
public struct Conv2DParameters: Sendable, Equatable {
    public var kernelH: Int, kernelW: Int
    public var strideH: Int, strideW: Int
    public var padH: Int, padW: Int
    public var groups: Int

    public init(kernel: Int, stride: Int = 1, padding: Int = 0, groups: Int = 1) {
        self.init(kernelH: kernel, kernelW: kernel, strideH: stride, strideW: stride,
                  padH: padding, padW: padding, groups: groups)
    }

    public init(kernelH: Int, kernelW: Int, strideH: Int, strideW: Int, padH: Int, padW: Int, groups: Int) {
        precondition(kernelH > 0 && kernelW > 0 && strideH > 0 && strideW > 0 && padH >= 0 && padW >= 0 && groups > 0,
                     "invalid conv geometry")
        (self.kernelH, self.kernelW, self.strideH, self.strideW) = (kernelH, kernelW, strideH, strideW)
        (self.padH, self.padW, self.groups) = (padH, padW, groups)
    }

    /// Output spatial size for an input of `h`×`w`.
    public func outputSize(h: Int, w: Int) -> (h: Int, w: Int) {
        ((h + 2 * padH - kernelH) / strideH + 1, (w + 2 * padW - kernelW) / strideW + 1)
    }

    /// The output columns `lo..<hi` whose input column ox · strideW − padW + kx lies in [0, w).
    func validColumns(kx: Int, w: Int, wo: Int) -> (lo: Int, hi: Int) {
        let lo = min(wo, max(0, (padW - kx + strideW - 1) / strideW))
        let last = w - 1 + padW - kx
        return (lo, last < 0 ? lo : max(lo, min(wo, last / strideW + 1)))
    }
}

/// y = activation(conv(x, weight) + bias) + residual.
///
/// - x: [N, Cin, H, W]; weight: [Cout, Cin / groups, kH, kW]; bias: [Cout] or nil;
///   residual: [N, Cout, Ho, Wo] or nil (added after the activation, as `add(residual, y)`
///   would, but in the epilogue pass instead of another pass over memory).
/// - Returns [N, Cout, Ho, Wo].
///
/// Dispatch: 1×1 stride-1 unpadded convolutions are one GEMM on the activation as it lies
/// (no im2col); depthwise convolutions run a direct SIMD kernel; everything else is
/// im2col + GEMM per group. Bias and activation are applied in one pass over each output row.
public func conv2d(_ x: Tensor, weight: Tensor, bias: [Float]?, _ p: Conv2DParameters,
                   activation: Activation = .none, residual: Tensor? = nil) -> Tensor {
    let (n, cin, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
    let cout = weight.shape[0]
    precondition(x.rank == 4 && weight.rank == 4, "conv2d: x \(x.shape), weight \(weight.shape)")
    precondition(cin % p.groups == 0 && cout % p.groups == 0 && weight.shape[1] == cin / p.groups
                 && weight.shape[2] == p.kernelH && weight.shape[3] == p.kernelW,
                 "conv2d: weight \(weight.shape) does not fit input \(x.shape) with \(p)")
    precondition(bias == nil || bias!.count == cout, "conv2d: bias has \(bias!.count) values for \(cout) channels")
    let (ho, wo) = p.outputSize(h: h, w: w)
    precondition(ho > 0 && wo > 0, "conv2d: input \(h)×\(w) is smaller than the kernel")
    precondition(residual == nil || residual!.shape == [n, cout, ho, wo],
                 "conv2d: residual \(residual!.shape) for an output of \([n, cout, ho, wo])")
    let plane = ho * wo
    let biases = bias ?? [Float](repeating: 0, count: cout)
    let threads = Parallel.width
    let res = residual?.scalars ?? []
    return Tensor(shape: [n, cout, ho, wo]) { yb in
        x.scalars.withUnsafeBufferPointer { xb in
            weight.scalars.withUnsafeBufferPointer { wb in
              res.withUnsafeBufferPointer { rb in
                let wa = Address(wb.baseAddress!)
                for b in 0..<n {
                    let xa = Address(xb.baseAddress! + b * cin * h * w), ya = Address(yb.baseAddress! + b * cout * plane)
                    let ra = rb.isEmpty ? nil : Address(rb.baseAddress! + b * cout * plane)
                    /// Output offset `i` of this image: bias, activation, residual.
                    @Sendable func epilogue(_ i: Int, count: Int, channel c: Int) {
                        convEpilogue(ya.pointer + i, count: count, bias: biases[c], activation,
                                     residual: ra.map { UnsafePointer($0.pointer + i) })
                    }
                    if p.groups == cin && cout == cin {
                        // Depthwise: whole channels per thread.
                        let parts = Parallel.ranges(cin, parts: threads)
                        Parallel.forEach(parts.count) { t in
                            let cs = parts[t]
                            depthwiseConv2d(xa.pointer + cs.lowerBound * h * w, wa.pointer + cs.lowerBound * p.kernelH * p.kernelW,
                                            ya.pointer + cs.lowerBound * plane, channels: cs.count, h: h, w: w, p)
                            for c in cs { epilogue(c * plane, count: plane, channel: c) }
                        }
                    } else if p.groups == 1 && p.kernelH == 1 && p.kernelW == 1 && p.strideH == 1
                                && p.strideW == 1 && p.padH == 0 && p.padW == 0 {
                        // 1×1: the activation is the GEMM's B as it lies; columns per thread.
                        let parts = Parallel.ranges(plane, parts: threads, align: 16)
                        Parallel.forEach(parts.count) { t in
                            let cols = parts[t]
                            let y = ya.pointer + cols.lowerBound
                            BLAS.serialSgemm(m: cout, n: cols.count, k: cin, a: wa.pointer, lda: cin,
                                             b: xa.pointer + cols.lowerBound, ldb: plane, c: y, ldc: plane)
                            for c in 0..<cout { epilogue(c * plane + cols.lowerBound, count: cols.count, channel: c) }
                        }
                    } else if p.groups == 1 {
                        // im2col + GEMM: output rows per thread, each with its own column matrix.
                        let parts = Parallel.ranges(ho, parts: threads)
                        Parallel.forEach(parts.count) { t in
                            let rows = parts[t]
                            let k = cin * p.kernelH * p.kernelW, cols = rows.count * wo
                            let buffer = UnsafeMutablePointer<Float>.allocate(capacity: k * cols)
                            defer { buffer.deallocate() }
                            im2col(xa.pointer, buffer, channels: cin, h: h, w: w, rows: rows, p)
                            let y = ya.pointer + rows.lowerBound * wo
                            BLAS.serialSgemm(m: cout, n: cols, k: k, a: wa.pointer, lda: k, b: buffer, ldb: cols,
                                             c: y, ldc: plane)
                            for c in 0..<cout { epilogue(c * plane + rows.lowerBound * wo, count: cols, channel: c) }
                        }
                    } else {
                        im2colConv2d(xa.pointer, wa.pointer, ya.pointer, cin: cin, cout: cout, h: h, w: w, p)
                        for c in 0..<cout { epilogue(c * plane, count: plane, channel: c) }
                    }
                }
              }
            }
        }
    }
}

/// row = activation(row + bias) + residual, in place. The residual is added in a second
/// sweep of the row (still in cache), exactly as a separate `add` would round it.
@inlinable
func convEpilogue(_ row: UnsafeMutablePointer<Float>, count: Int, bias: Float, _ activation: Activation,
                  residual: UnsafePointer<Float>? = nil) {
    let b = Vec16(repeating: bias)
    switch activation {
    case .none: map16(UnsafePointer(row), row, count) { $0 + b }
    case .silu: map16(UnsafePointer(row), row, count) { silu($0 + b) }
    case .sigmoid: map16(UnsafePointer(row), row, count) { sigmoid($0 + b) }
    }
    if let r = residual { addVectors(r, UnsafePointer(row), into: row, count: count) }
}

/// General convolution of one image: per group, unfold the input into a
/// [Cin/g · kH · kW, Ho · Wo] column matrix and multiply by the group's weight rows.
func im2colConv2d(_ x: UnsafePointer<Float>, _ weight: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>,
                  cin: Int, cout: Int, h: Int, w: Int, _ p: Conv2DParameters) {
    let (ho, wo) = p.outputSize(h: h, w: w)
    let cinG = cin / p.groups, coutG = cout / p.groups
    let k = cinG * p.kernelH * p.kernelW, plane = ho * wo
    let cols = UnsafeMutablePointer<Float>.allocate(capacity: k * plane)
    defer { cols.deallocate() }
    for g in 0..<p.groups {
        im2col(x + g * cinG * h * w, cols, channels: cinG, h: h, w: w, rows: 0..<ho, p)
        BLAS.sgemm(m: coutG, n: plane, k: k, a: weight + g * coutG * k, lda: k,
                   b: cols, ldb: plane, c: y + g * coutG * plane, ldc: plane)
    }
}

/// x: [C, H, W] → cols: [C · kH · kW, rows.count · Wo] for the output rows `rows`, zeros where
/// the window leaves the image.
func im2col(_ x: UnsafePointer<Float>, _ cols: UnsafeMutablePointer<Float>, channels: Int, h: Int, w: Int,
            rows: Range<Int>, _ p: Conv2DParameters) {
    let (_, wo) = p.outputSize(h: h, w: w)
    let width = rows.count * wo
    var row = cols
    for c in 0..<channels {
        let plane = x + c * h * w
        for ky in 0..<p.kernelH {
            for kx in 0..<p.kernelW {
                let (lo, hi) = p.validColumns(kx: kx, w: w, wo: wo)
                for oy in rows {
                    let out = row + (oy - rows.lowerBound) * wo
                    let iy = oy * p.strideH - p.padH + ky
                    guard iy >= 0 && iy < h else {
                        out.initialize(repeating: 0, count: wo)
                        continue
                    }
                    out.initialize(repeating: 0, count: lo)
                    let src = plane + iy * w - p.padW + kx
                    if p.strideW == 1 {
                        (out + lo).update(from: src + lo, count: hi - lo)
                    } else {
                        for ox in lo..<hi { out[ox] = src[ox * p.strideW] }
                    }
                    (out + hi).initialize(repeating: 0, count: wo - hi)
                }
                row += width
            }
        }
    }
}

/// Depthwise convolution (groups == Cin == Cout) of one image, without bias.
/// x: [C, H, W], weight: [C, 1, kH, kW], y: [C, Ho, Wo] (overwritten).
/// Each kernel tap adds a shifted input row into the output row; for stride 1 the row
/// is contiguous and runs 16 lanes at a time.
func depthwiseConv2d(_ x: UnsafePointer<Float>, _ weight: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>,
                     channels: Int, h: Int, w: Int, _ p: Conv2DParameters) {
    let (ho, wo) = p.outputSize(h: h, w: w)
    for c in 0..<channels {
        let plane = x + c * h * w, out = y + c * ho * wo, wc = weight + c * p.kernelH * p.kernelW
        out.initialize(repeating: 0, count: ho * wo)
        for oy in 0..<ho {
            let orow = out + oy * wo
            for ky in 0..<p.kernelH {
                let iy = oy * p.strideH - p.padH + ky
                guard iy >= 0 && iy < h else { continue }
                for kx in 0..<p.kernelW {
                    let (lo, hi) = p.validColumns(kx: kx, w: w, wo: wo)
                    let src = plane + iy * w - p.padW + kx
                    let wt = wc[ky * p.kernelW + kx]
                    if p.strideW == 1 {
                        let wv = Vec16(repeating: wt)
                        var ox = lo
                        while ox + 16 <= hi {
                            orow.store(orow.vec16(ox) + wv * src.vec16(ox), at: ox)
                            ox += 16
                        }
                        while ox < hi {
                            orow[ox] += wt * src[ox]
                            ox += 1
                        }
                    } else {
                        for ox in lo..<hi { orow[ox] += wt * src[ox * p.strideW] }
                    }
                }
            }
        }
    }
}

extension Reference {
    /// Direct seven-loop convolution with Double accumulation.
    public static func conv2d(_ x: Tensor, weight: Tensor, bias: [Float]?, _ p: Conv2DParameters,
                              activation: Activation = .none) -> Tensor {
        let (n, cin, h, w) = (x.shape[0], x.shape[1], x.shape[2], x.shape[3])
        let cout = weight.shape[0], cinG = cin / p.groups, coutG = cout / p.groups
        let (ho, wo) = p.outputSize(h: h, w: w)
        let (kh, kw) = (p.kernelH, p.kernelW)
        var y = [Float](repeating: 0, count: n * cout * ho * wo)
        for b in 0..<n {
            for oc in 0..<cout {
                let g = oc / coutG
                for oy in 0..<ho {
                    for ox in 0..<wo {
                        var acc = Double(bias?[oc] ?? 0)
                        for ic in 0..<cinG {
                            for ky in 0..<kh {
                                for kx in 0..<kw {
                                    let iy = oy * p.strideH - p.padH + ky, ix = ox * p.strideW - p.padW + kx
                                    guard iy >= 0 && iy < h && ix >= 0 && ix < w else { continue }
                                    let xv = x.scalars[((b * cin + g * cinG + ic) * h + iy) * w + ix]
                                    let wv = weight.scalars[((oc * cinG + ic) * kh + ky) * kw + kx]
                                    acc += Double(xv) * Double(wv)
                                }
                            }
                        }
                        y[((b * cout + oc) * ho + oy) * wo + ox] = activate(acc, activation)
                    }
                }
            }
        }
        return Tensor(shape: [n, cout, ho, wo], scalars: y)
    }
}

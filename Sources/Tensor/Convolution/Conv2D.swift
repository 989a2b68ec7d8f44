import CTargetFeatures
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

}

/// y = activation(conv(x, weight) + bias) + residual.
///
/// - x: [N, Cin, H, W]; weight: [Cout, Cin / groups, kH, kW]; bias: [Cout] or nil;
///   residual: [N, Cout, Ho, Wo] or nil (added after the activation, as `add(residual, y)`
///   would, but before the output leaves the registers instead of in another pass).
/// - Returns [N, Cout, Ho, Wo].
public func conv2d(_ x: Tensor, weight: Tensor, bias: [Float]?, _ p: Conv2DParameters,
                   activation: Activation = .none, residual: Tensor? = nil) -> Tensor {
    conv2d(x, weight: ConvWeights(weight, p), bias: bias, p, activation: activation, residual: residual)
}

/// `conv2d` with weights laid out at load, on tensors: each image through the map kernel below.
public func conv2d(_ x: Tensor, weight: ConvWeights, bias: [Float]?, _ p: Conv2DParameters,
                   activation: Activation = .none, residual: Tensor? = nil) -> Tensor {
    precondition(x.rank == 4, "conv2d: x \(x.shape)")
    let (n, cout) = (x.shape[0], weight.shape[0])
    let (ho, wo) = p.outputSize(h: x.shape[2], w: x.shape[3])
    precondition(ho > 0 && wo > 0, "conv2d: input \(x.shape[2])×\(x.shape[3]) is smaller than the kernel")
    precondition(residual == nil || residual!.shape == [n, cout, ho, wo],
                 "conv2d: residual \(residual!.shape) for an output of \([n, cout, ho, wo])")
    let scratch = Scratch(), biases = bias ?? [Float](repeating: 0, count: cout)
    return Tensor(shape: [n, cout, ho, wo]) { yb in
        for image in 0..<n {
            let y = Map(yb.baseAddress! + image * cout * ho * wo, channels: cout, height: ho, width: wo)
            x.withMap(image: image) { x in
                if let residual {
                    residual.withMap(image: image) {
                        conv2d(x, weight: weight, bias: biases, p, activation: activation, residual: $0, into: y, scratch: scratch)
                    }
                } else {
                    conv2d(x, weight: weight, bias: biases, p, activation: activation, into: y, scratch: scratch)
                }
            }
        }
    }
}

/// y = activation(conv(x, weight) + bias) + residual for one image: x [Cin, H, W], y and
/// residual [Cout, Ho, Wo], apart from x and from each other.
///
/// The kernel is the weights' `ConvAlgorithm`: Winograd's F(2×2, 3×3) (`winogradConv2d`), 2×2
/// output tiles (`stride2TilesConv2d`), depthwise, or one GEMM per group over an implicit im2col
/// (`packedGEMM`): B's row for input channel c and tap (ky, kx) is a shifted view of the input's
/// `PhasePlanes`, so nothing is unfolded, and the GEMM applies bias, activation and residual as it
/// stores. Strided depthwise convolutions sum the same views per channel (`depthwiseConv2d`),
/// stride-1 ones a few padded input rows at a time (`DepthwiseRows`).
/// Each thread takes blocks of output rows and lays out only their planes (in cache when the
/// GEMM reads them, and little memory). The planes' rows are `width` ≥ Wo wide: the GEMM reads
/// each output row's Wo columns of them and writes the output in place.
/// 1×1 stride-1 unpadded convolutions read the input as it lies.
///
/// `tiles`: the GEMM's register tiles (tests run both geometries on every build).
package func conv2d(_ x: Map, weight: ConvWeights, bias: [Float], _ p: Conv2DParameters, activation: Activation = .none,
                    residual: Map? = nil, into y: Map, scratch: Scratch, tiles: TileGeometry = .target) {
    let (cin, h, w) = (x.channels, x.height, x.width)
    let cout = weight.shape[0]
    precondition(weight.groups == p.groups && cin % p.groups == 0 && weight.shape[1] == cin / p.groups
                 && weight.shape[2] == p.kernelH && weight.shape[3] == p.kernelW
                 && weight.algorithm == ConvAlgorithm(weightShape: weight.shape, p),
                 "conv2d: weight \(weight.shape) does not fit \(cin) input channels with \(p)")
    precondition(bias.count == cout, "conv2d: bias has \(bias.count) values for \(cout) channels")
    let (ho, wo) = p.outputSize(h: h, w: w)
    precondition(ho > 0 && wo > 0, "conv2d: input \(h)×\(w) is smaller than the kernel")
    precondition(y.channels == cout && y.height == ho && y.width == wo,
                 "conv2d: output \(y.channels)×\(y.height)×\(y.width) for \(cout)×\(ho)×\(wo)")
    precondition(residual.map { $0.hasShape(of: y) } ?? true, "conv2d: the residual's shape differs from the output's")
    let plane = ho * wo
    let threads = Parallel.width
    let k = weight.reduction, cinG = cin / p.groups, coutG = cout / p.groups, panels = weight.panelsPerGroup * k * 8
    let (xa, ya, ra) = (Address(x.base), Address(y.base), residual.map { Address($0.base) })
    weight.values.withUnsafeBufferPointer { wb in
    bias.withUnsafeBufferPointer { bb in
        let (wa, ba) = (Address(wb.baseAddress!), Address(bb.baseAddress!))
        let depthwise: Bool
        switch weight.algorithm {
        case .winograd3x3:
            return winogradConv2d(xa.pointer, channels: cin, h: h, w: w, weight: wa.pointer, outputs: cout, ya.pointer,
                                  bias: ba.pointer, activation: activation, residual: ra.map { UnsafePointer($0.pointer) },
                                  threads: threads, scratch: scratch, tiles: tiles)
        case .stride2Tiles3x3:
            return stride2TilesConv2d(xa.pointer, channels: cin, h: h, w: w, weight: wa.pointer, outputs: cout, ya.pointer,
                                      bias: ba.pointer, activation: activation, residual: ra.map { UnsafePointer($0.pointer) },
                                      threads: threads, scratch: scratch, tiles: tiles)
        case .depthwise where p.strideH == 1 && p.strideW == 1:
            let pitch = DepthwiseRows.pitch(wo: wo, kernelW: p.kernelW), parts = Parallel.ranges(cin, parts: 4 * threads)
            let workers = min(threads, parts.count), perThread = (p.kernelH + 1) * pitch
            let (ring, _) = scratch.take(floats: workers * perThread)
            return Parallel.forEach(parts.count, threads: workers, DepthwiseRows(
                x: xa, y: ya, residual: ra, weight: wa, bias: ba, ring: Address(ring), pitch: pitch, parts: parts, p: p,
                activation: activation, h: h, w: w, ho: ho, wo: wo))
        case .depthwise: depthwise = true
        case .gemm: depthwise = false
        }
        // Strided depthwise convolutions and GEMMs both read the phase planes; 1×1 GEMMs the input.
        let direct = p.kernelH == 1 && p.kernelW == 1 && p.strideH == 1 && p.strideW == 1 && p.padH == 0 && p.padW == 0
            && !depthwise
        let phases = PhasePlanes(channels: cin, h: h, w: w, ho: ho, threads: threads, p)
        // Parts for threads to claim as they come free: a block of rows each (with a fixed share
        // each, a thread waits for a core the system stalls), or a range of columns a thread for
        // 1×1 (each part streams all the weights).
        let parts = direct ? Parallel.ranges(plane, parts: threads, align: 48)
            : Parallel.ranges(phases.blockCount, parts: phases.blockCount)
        let workers = min(threads, parts.count), taps = p.kernelH * p.kernelW
        // Each thread's GEMM temporaries and planes, then B's row offsets.
        let blocks = depthwise ? nil : GEMMBlocks.forProduct(m: coutG, k: k)
        let gemmFloats = gemmScratch(m: coutG, blocks: blocks)
        let perThread = gemmFloats + (direct ? 0 : phases.count)
        // B in place (`packedGEMM`) for ≤ 32 output channels, whose tiles reuse a copied panel too
        // few times to pay for it; never when its channels are a multiple of 4 KB apart, which
        // fall into the same L1 sets.
        let inPlace = coutG <= 32 && (direct ? h * w : phases.channelStride) % 1024 != 0
        let (buffers, rows) = scratch.take(floats: workers * perThread, ints: cinG * taps)
        if direct {
            for c in 0..<cinG { rows[c] = c * h * w }
        } else {
            phases.rowOffsets(channels: cinG, p, into: rows)
        }
        Parallel.forEach(parts.count, threads: workers, ConvParts(
            x: xa, y: ya, residual: ra, weight: wa, bias: ba, rows: Address(rows), scratch: Address(buffers),
            perThread: perThread, gemmFloats: gemmFloats, parts: parts, direct: direct, inPlace: inPlace,
            depthwise: depthwise, blocks: blocks, phases: phases, p: p, activation: activation, tiles: tiles, cin: cin, ho: ho,
            wo: wo, k: k, coutG: coutG, panels: panels))
    }
    }
}

/// `conv2d`'s GEMM and depthwise paths: a part is a range of output columns (direct) or of row
/// blocks (the phase planes), run with its thread's scratch.
private struct ConvParts: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    /// B's row offsets, and the scratch (`perThread` floats a thread: `gemmFloats` of GEMM
    /// temporaries, then planes).
    let rows: Address<Int>, scratch: Address<Float>
    let perThread: Int, gemmFloats: Int
    let parts: Partition
    /// 1×1: B is x as it lies.
    let direct: Bool, inPlace: Bool, depthwise: Bool
    let blocks: GEMMBlocks?
    let phases: PhasePlanes
    let p: Conv2DParameters
    let activation: Activation
    let tiles: TileGeometry
    let cin: Int, ho: Int, wo: Int, k: Int, coutG: Int, panels: Int

    func run(part: Int, thread t: Int) {
        let plane = ho * wo
        if direct {
            // The input is B as it lies.
            let cols = parts[part]
            return gemm(x.pointer + cols.lowerBound, channelStride: plane, columns: cols.count, runs: nil,
                        from: cols.lowerBound, thread: t)
        }
        let planes = scratch.pointer + t * perThread + gemmFloats
        for block in parts[part] {
            let first = block * phases.blockRows, count = min(phases.blockRows, ho - first)
            phases.fill(planes, from: x.pointer, outputRows: first, p)
            if depthwise {
                depthwiseConv2d(planes, phases, taps: rows.pointer, weight: weight.pointer, y.pointer,
                                channels: 0..<cin, rows: first..<(first + count), ho: ho, wo: wo,
                                Epilogue(bias: bias.pointer, activation: activation,
                                         residual: residual.map { UnsafePointer($0.pointer) }))
            } else {
                gemm(planes, channelStride: phases.channelStride, columns: count * wo,
                     runs: (wo, phases.width), from: first * wo, thread: t)
            }
        }
    }

    /// GEMMs of every group over output columns `o ..< o + columns` (the residual's too),
    /// reading B from `b` in `runs`.
    private func gemm(_ b: UnsafePointer<Float>, channelStride: Int, columns: Int, runs: (length: Int, stride: Int)?,
                      from o: Int, thread t: Int) {
        let plane = ho * wo, cinG = cin / p.groups
        for g in 0..<p.groups {
            packedGEMM(weight.pointer + g * panels, m: coutG, k: k, b: b + g * cinG * channelStride, rows: rows.pointer,
                       n: columns, runs: runs,
                       c: y.pointer + o + g * coutG * plane, ldc: plane,
                       Epilogue(bias: bias.pointer + g * coutG, activation: activation,
                                residual: residual.map { UnsafePointer($0.pointer + o + g * coutG * plane) }),
                       scratch: scratch.pointer + t * perThread, inPlace: inPlace, blocks: blocks, tiles: tiles)
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

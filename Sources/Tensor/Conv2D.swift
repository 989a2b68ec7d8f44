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
/// 3×3 stride-1 padding-1 convolutions with `ConvWeights.winograd` weights run Winograd's F(2×2, 3×3)
/// (`winogradConv2d`, 16 GEMMs with 4/9 of the multiply-adds). Every other convolution but a depthwise one is one
/// GEMM per group over an implicit im2col (`packedGEMM`): B's row for input channel c and tap
/// (ky, kx) is a shifted view of the input's `PhasePlanes`, so nothing is unfolded, and the GEMM
/// applies bias, activation and residual as it stores. Strided depthwise convolutions sum the same views per channel
/// (`depthwiseConv2d`), stride-1 ones a few padded input rows at a time (`DepthwiseRows`).
/// Each thread takes blocks of output rows and lays out only their planes (in cache when the
/// GEMM reads them, and little memory). The planes' rows are `width` ≥ Wo wide: the GEMM reads
/// each output row's Wo columns of them and writes the output in place.
/// 1×1 stride-1 unpadded convolutions read the input as it lies. Stride-2 3×3 padding-1 ones of
/// one group and 64 or more output channels run on 2×2 output tiles (`stride2TilesConv2d`).
///
/// `tiles`: the GEMM's register tiles (tests run both geometries on every build).
package func conv2d(_ x: Map, weight: ConvWeights, bias: [Float], _ p: Conv2DParameters, activation: Activation = .none,
                    residual: Map? = nil, into y: Map, scratch: Scratch, tiles: TileGeometry = .target) {
    let (cin, h, w) = (x.channels, x.height, x.width)
    let cout = weight.shape[0]
    precondition(weight.groups == p.groups && cin % p.groups == 0 && weight.shape[1] == cin / p.groups
                 && weight.shape[2] == p.kernelH && weight.shape[3] == p.kernelW
                 && weight.isWinograd == ConvWeights.winograd(weight.shape, p),
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
        if weight.isWinograd {
            return winogradConv2d(xa.pointer, channels: cin, h: h, w: w, weight: wa.pointer, outputs: cout, ya.pointer,
                                  bias: ba.pointer, activation: activation, residual: ra.map { UnsafePointer($0.pointer) },
                                  threads: threads, scratch: scratch, tiles: tiles)
        }
        if weight.isTiles {
            return stride2TilesConv2d(xa.pointer, channels: cin, h: h, w: w, weight: wa.pointer, outputs: cout, ya.pointer,
                                      bias: ba.pointer, activation: activation, residual: ra.map { UnsafePointer($0.pointer) },
                                      threads: threads, scratch: scratch, tiles: tiles)
        }
        if weight.isDepthwise && p.strideH == 1 && p.strideW == 1 {
            let pitch = DepthwiseRows.pitch(wo: wo, kernelW: p.kernelW), parts = Parallel.ranges(cin, parts: 4 * threads)
            let workers = min(threads, parts.count), perThread = (p.kernelH + 1) * pitch
            let (ring, _) = scratch.take(floats: workers * perThread)
            return Parallel.forEach(parts.count, threads: workers, DepthwiseRows(
                x: xa, y: ya, residual: ra, weight: wa, bias: ba, ring: Address(ring), pitch: pitch, parts: parts, p: p,
                activation: activation, h: h, w: w, ho: ho, wo: wo))
        }
        let direct = p.kernelH == 1 && p.kernelW == 1 && p.strideH == 1 && p.strideW == 1 && p.padH == 0 && p.padW == 0
            && !weight.isDepthwise
        let phases = PhasePlanes(channels: cin, h: h, w: w, ho: ho, threads: threads, p)
        // Parts for threads to claim as they come free: a block of rows each (a fixed half of
        // the blocks each waited for a core the system had stalled), or a range of columns a
        // thread for 1×1 (four a thread, each streaming all the weights, measured no better).
        let parts = direct ? Parallel.ranges(plane, parts: threads, align: 48)
            : Parallel.ranges(phases.blockCount, parts: phases.blockCount)
        let workers = min(threads, parts.count), taps = p.kernelH * p.kernelW
        // Each thread's GEMM temporaries and planes, then B's row offsets.
        let perThread = gemmScratch(m: coutG) + (direct ? 0 : phases.count)
        // B in place for ≤ 32 output channels (Zen 3, same process, alternating: 0.58–0.9 of the
        // time with the panel copy on 3×3 convolutions of 16 or fewer input channels and 1×1
        // ones on 80×80 maps), and for any number where L1 holds 48 KB (Zen 5: 0.93–1.0 per
        // convolution, whole yolo26n 0.988–0.991), unless its channels are a multiple of 4 KB
        // apart (1×1 on 160×160: 1.17–1.32).
        let inPlace = (coutG <= 32 || largeL1) && (direct ? h * w : phases.channelStride) % 1024 != 0
        let (buffers, rows) = scratch.take(floats: workers * perThread, ints: cinG * taps)
        if direct {
            for c in 0..<cinG { rows[c] = c * h * w }
        } else {
            phases.rowOffsets(channels: cinG, p, into: rows)
        }
        Parallel.forEach(parts.count, threads: workers, ConvParts(
            x: xa, y: ya, residual: ra, weight: wa, bias: ba, rows: Address(rows), scratch: Address(buffers),
            perThread: perThread, parts: parts, direct: direct, inPlace: inPlace,
            depthwise: weight.isDepthwise, phases: phases, p: p, activation: activation, tiles: tiles, cin: cin, ho: ho,
            wo: wo, k: k, coutG: coutG, panels: panels))
    }
    }
}

/// `conv2d`'s GEMM and depthwise paths: a part is a range of output columns (direct) or of row
/// blocks (the phase planes), run with its thread's scratch.
private struct ConvParts: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    /// B's row offsets, and the scratch (`perThread` floats a thread: GEMM temporaries, then planes).
    let rows: Address<Int>, scratch: Address<Float>
    let perThread: Int
    let parts: Partition
    /// 1×1: B is x as it lies.
    let direct: Bool, inPlace: Bool, depthwise: Bool
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
        let planes = scratch.pointer + t * perThread + gemmScratch(m: coutG)
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
                       scratch: scratch.pointer + t * perThread, inPlace: inPlace, tiles: tiles)
        }
    }
}

/// A block of output rows' share of the zero-padded input, split by stride phase
/// ("polyphase"): for stride (sH, sW), channel c holds sH · sW planes, plane (py, px) holding
/// the padded input's rows py, py + sH, … and columns px, px + sW, …. Output pixel (oy, ox)
/// reads tap (ky, kx) at row oy + ky / sH, column ox + kx / sW of plane (ky % sH, kx % sW):
/// every tap is the same plane shifted, so one GEMM column j = oy · width + ox sees all its
/// taps at fixed offsets from j.
struct PhasePlanes: Sendable {
    /// Columns of one plane, and rows: a block's output rows plus the kernel's reach below.
    let width: Int, height: Int
    /// Output rows per block, and blocks.
    let blockRows: Int, blockCount: Int
    let strideH: Int, strideW: Int, padH: Int, padW: Int
    /// Floats per plane: one spare zero row, for the grid's last row reading past its end.
    let planeSize: Int
    let h: Int, w: Int
    let channels: Int
    /// Kernel taps per channel.
    let taps: Int

    /// Blocks of at most about 256 K floats of planes (1 MB, this CPU's L2; 64 K floats ran
    /// 1.5 ms slower per yolo26n inference).
    init(channels: Int, h: Int, w: Int, ho: Int, threads: Int, _ p: Conv2DParameters) {
        (strideH, strideW, padH, padW, self.h, self.w, self.channels) = (p.strideH, p.strideW, p.padH, p.padW, h, w, channels)
        width = (w + 2 * p.padW + p.strideW - 1) / p.strideW
        let reach = (p.kernelH - 1) / p.strideH
        let perRow = channels * p.strideH * p.strideW * width
        // As many blocks as the budget needs, rounded up to a multiple of the threads so each
        // gets the same share (5 blocks on 2 threads left the first layer 3:2 unbalanced).
        let fitting = max(1, (1 << 18) / perRow - reach)
        let blocks = ((ho + fitting - 1) / fitting + threads - 1) / threads * threads
        blockRows = (ho + blocks - 1) / blocks
        blockCount = (ho + blockRows - 1) / blockRows
        height = blockRows + reach
        planeSize = (height + 1) * width
        taps = p.kernelH * p.kernelW
    }

    /// Floats of one block's planes, and the GEMM's read slack past them.
    var count: Int { channels * channelStride + gemmReadSlack }
    /// Floats from one channel's planes to the next.
    var channelStride: Int { strideH * strideW * planeSize }
    /// Floats of one output channel of a block's grid.
    var gridSize: Int { blockRows * width }

    /// B's row offsets for `channels` input channels into `rows`: tap (c, ky, kx) in the weights' order.
    func rowOffsets(channels: Int, _ p: Conv2DParameters, into rows: UnsafeMutablePointer<Int>) {
        var i = 0
        for c in 0..<channels {
            for ky in 0..<p.kernelH {
                for kx in 0..<p.kernelW {
                    rows[i] = c * channelStride + ((ky % strideH) * strideW + kx % strideW) * planeSize
                        + (ky / strideH) * width + kx / strideW
                    i += 1
                }
            }
        }
    }

    /// Writes the planes of the block starting at output row `first` from x [C, H, W].
    func fill(_ planes: UnsafeMutablePointer<Float>, from x: UnsafePointer<Float>, outputRows first: Int, _ p: Conv2DParameters) {
        let phase0 = columns(phase: 0), phase1 = columns(phase: min(1, strideW - 1))
        // Input rows in order (row by row, each to its phase's planes): a phase's rows one after
        // the other read every stride-th row, which the prefetcher followed less well (stride 2,
        // Zen 3, same process, alternating: 0.89–0.97 of the convolution's time).
        for c in 0..<channels {
            let out = planes + c * channelStride
            for row in 0..<height {
                for py in 0..<strideH {
                    let iy = (first + row) * strideH + py - padH
                    let source = iy >= 0 && iy < h ? x + (c * h + iy) * w : nil
                    let o = out + py * strideW * planeSize + row * width
                    // The input row two on, into L1: the fill waited on its first loads of each row
                    // (16×320×320 → 32, stride 2: 0.93 of the time; 3×640×640: 0.96; 4 rows on: the same).
                    if iy + 2 >= 0 && iy + 2 < h {
                        let ahead = x + (c * h + iy + 2) * w
                        for i in stride(from: 0, to: w, by: 16) { prefetchL1(ahead + i) }
                    }
                    if strideW == 2 {
                        fillPair(o, phase0, phase1, from: source)
                    } else {
                        for px in 0..<strideW {
                            fill(o + px * planeSize, phase: px, px == 0 ? phase0 : columns(phase: px), from: source)
                        }
                    }
                }
            }
            for plane in 0..<(strideH * strideW) { (out + plane * planeSize + height * width).initialize(repeating: 0, count: width) }
        }
    }

    /// Columns lo..<hi of phase `px`'s rows hold input columns ix = col · sW + px − padW in [0, w).
    private func columns(phase px: Int) -> (lo: Int, hi: Int) {
        let lo = min(width, max(0, (padW - px + strideW - 1) / strideW)), last = w - 1 + padW - px
        return (lo, last < 0 ? lo : max(lo, min(width, last / strideW + 1)))
    }

    /// Row `o` of phase `px`'s plane, whose input columns are `columns`, from input row `source`
    /// (zeros for a padding row).
    private func fill(_ o: UnsafeMutablePointer<Float>, phase px: Int, _ columns: (lo: Int, hi: Int),
                      from source: UnsafePointer<Float>?) {
        guard let source else { return o.initialize(repeating: 0, count: width) }
        let (lo, hi) = columns
        o.initialize(repeating: 0, count: lo)
        if strideW == 1 {
            (o + lo).initialize(from: source + lo + px - padW, count: hi - lo)
        } else {
            for col in lo..<hi { o[col] = source[col * strideW + px - padW] }
        }
        (o + hi).initialize(repeating: 0, count: width - hi)
    }

    /// Stride 2: the rows `o` of phase 0 and `o + planeSize` of phase 1 (input columns `phase0`,
    /// `phase1`) in one pass over input row `source` (zeros for a padding row), column col of phase
    /// px being source[2 · col + px − padW]: 32 floats from source[2 · col − padW] are 16 pairs
    /// (phase 0, phase 1), 16 64-bit lanes whose low and high halves a truncation splits with
    /// permutes. Against a pass a phase, which read every row twice: 0.93–1.0 of a convolution's
    /// time (Zen 3, alternating in one process).
    private func fillPair(_ o: UnsafeMutablePointer<Float>, _ phase0: (lo: Int, hi: Int), _ phase1: (lo: Int, hi: Int),
                          from source: UnsafePointer<Float>?) {
        let o1 = o + planeSize
        guard let source else {
            o.initialize(repeating: 0, count: width)
            return o1.initialize(repeating: 0, count: width)
        }
        let (lo0, hi0) = phase0, (lo1, hi1) = phase1
        o.initialize(repeating: 0, count: lo0)
        o1.initialize(repeating: 0, count: lo1)
        // Columns where both phases read the input; the pairs start at src + 2 · col.
        let lo = max(lo0, lo1), hi = max(lo, min(hi0, hi1)), src = source - padW
        @inline(__always) func pairs(_ col: Int) {
            let v = UnsafeRawPointer(src + 2 * col).loadUnaligned(as: SIMD16<UInt64>.self)
            UnsafeMutableRawPointer(o + col).storeBytes(of: SIMD16<UInt32>(truncatingIfNeeded: v), as: SIMD16<UInt32>.self)
            UnsafeMutableRawPointer(o1 + col).storeBytes(of: SIMD16<UInt32>(truncatingIfNeeded: v &>> 32),
                                                         as: SIMD16<UInt32>.self)
        }
        var col = lo
        // 32 floats only while they are all in the row (the last row of x ends its buffer)…
        while col + 16 <= hi && 2 * col - padW + 32 <= w {
            pairs(col)
            col += 16
        }
        // …then the 16 pairs ending at hi, over some already written: hi ≤ hi1 keeps them in the row.
        if col < hi && hi - lo >= 16 {
            pairs(hi - 16)
            col = hi
        }
        for c in col..<hi { (o[c], o1[c]) = (src[2 * c], src[2 * c + 1]) }
        // Columns only one phase reads, at the row's ends.
        for c in lo0..<min(lo, hi0) { o[c] = src[2 * c] }
        for c in min(max(hi, lo0), hi0)..<hi0 { o[c] = src[2 * c] }
        for c in lo1..<min(lo, hi1) { o1[c] = src[2 * c + 1] }
        for c in min(max(hi, lo1), hi1)..<hi1 { o1[c] = src[2 * c + 1] }
        (o + hi0).initialize(repeating: 0, count: width - hi0)
        (o1 + hi1).initialize(repeating: 0, count: width - hi1)
    }
}

/// Strided depthwise convolution (groups == Cin == Cout) of channels `channels`, output rows `rows` of
/// one image from their phase planes (the block starting at `rows.lowerBound`):
/// y[c] = epilogue(Σ over taps t of weight[c, t] · tap t's view of the planes), with `taps` the
/// offsets of `PhasePlanes.rowOffsets(channels: 1, …)`. Every tap of a 48- or 16-column run of
/// an output row is summed in registers and stored once.
func depthwiseConv2d(_ planes: UnsafePointer<Float>, _ phases: PhasePlanes, taps: UnsafePointer<Int>,
                     weight: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, channels: Range<Int>,
                     rows: Range<Int>, ho: Int, wo: Int, _ epilogue: Epilogue) {
    let count = phases.taps
    for c in channels {
        let wc = weight + c * count
        for oy in rows {
            let row = planes + c * phases.channelStride + (oy - rows.lowerBound) * phases.width, out = c * ho * wo + oy * wo
            func run<R: TileRow>(_: R.Type, at ox: Int) {
                var acc = R()
                for t in 0..<count { acc.add(wc[t], times: R(loading: row + taps[t] + ox)) }
                acc.adding(epilogue.bias[c]).store(at: out + ox, into: y)
            }
            let ox = columnRuns(wo, { run(Row48.self, at: $0) }, { run(Row16.self, at: $0) })
            epilogue.finish(rows: 0..<1, sums: y + out, ld: 0, ldc: 0, column: out, width: ox, in: y)
            guard ox < wo else { continue }
            // The last < 16 columns: the 16 ending at Wo, the same math as the runs (lanes before
            // `ox` recomputed and dropped); on a row narrower than 16, lanes gathered one by one.
            let first = max(0, wo - 16), lanes = wo - first
            var sum = Vec16()
            for t in 0..<count {
                var v = Vec16()
                if lanes == 16 {
                    v = row.vec16(taps[t] + first)
                } else {
                    for i in 0..<lanes { v[i] = row[taps[t] + first + i] }
                }
                sum = sum.addingProduct(Vec16(repeating: wc[t]), v)
            }
            let result = epilogue.apply(sum, row: c)
            if lanes == 16 {
                // Lanes before `ox` again, the same values: one store (one float at a time, the
                // stores were a fifth of a 40×40 convolution's time).
                y.store(result + (epilogue.residual?.vec16(out + first) ?? Vec16()), at: out + first)
                continue
            }
            for i in (ox - first)..<lanes {
                y[out + first + i] = result[i] + (epilogue.residual?[out + first + i] ?? 0)
            }
        }
    }
}

/// Stride-1 depthwise convolutions (groups == Cin == Cout) straight from x [C, H, W]: a part is a
/// range of channels. Each input row is copied once, zero-padded, into its thread's ring of kH + 1
/// rows of `pitch` floats (in L1), and each output row sums its kH · kW taps from the ring a
/// vector at a time, bias, activation and residual applied before its one store.
private struct DepthwiseRows: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    /// kH + 1 rows of `pitch` floats a thread.
    let ring: Address<Float>, pitch: Int
    let parts: Partition
    let p: Conv2DParameters
    let activation: Activation
    let h: Int, w: Int, ho: Int, wo: Int

    /// Floats of a ring row: the widest vector's reach past the last output column, whole vectors.
    static func pitch(wo: Int, kernelW: Int) -> Int { (max(wo, 16) + kernelW - 1 + 15) / 16 * 16 }

    func run(part: Int, thread t: Int) {
        let ring = self.ring.pointer + t * (p.kernelH + 1) * pitch
        if wideVectors {
            run(Vec16.self, channels: parts[part], ring: ring)
        } else {
            run(Vec8.self, channels: parts[part], ring: ring)
        }
    }

    /// One loop per activation.
    @inline(__always)
    private func run<V: FloatVector>(_: V.Type, channels: Range<Int>, ring: UnsafeMutablePointer<Float>) {
        switch activation {
        case .none: run(channels, ring) { (v: V) in v }
        case .silu: run(channels, ring) { (v: V) in silu(v) }
        case .sigmoid: run(channels, ring) { (v: V) in sigmoid(v) }
        }
    }

    @inline(__always)
    private func run<V: FloatVector>(_ channels: Range<Int>, _ ring: UnsafeMutablePointer<Float>, _ f: (V) -> V) {
        let (kh, kw) = (p.kernelH, p.kernelW)
        let n = V.scalarCount, (padH, padW) = (p.padH, p.padW), three = kh == 3 && kw == 3
        // The padding columns are never written after this.
        let slots = kh + 1
        ring.initialize(repeating: 0, count: slots * pitch)
        for c in channels {
            let xc = x.pointer + c * h * w, wc = weight.pointer + c * kh * kw, yc = y.pointer + c * ho * wo
            let rc = residual.map { UnsafePointer($0.pointer + c * ho * wo) }, b = bias.pointer[c]
            /// Input row iy into slot `index`, from column padW: zeros for a padding row.
            func load(_ iy: Int, into index: Int) {
                let slot = ring + index * pitch + padW
                guard iy >= 0 && iy < h else { return slot.initialize(repeating: 0, count: w) }
                let row = xc + iy * w
                var i = 0
                while i + n <= w {
                    slot.store(row.vector(i) as V, at: i)
                    i &+= n
                }
                for j in i..<w { slot[j] = row[j] }
            }
            for ky in 0..<kh { load(ky - padH, into: ky) }
            // Input rows oy − padH + ky are in slots (oy + ky) % (kH + 1): `first` is oy's, kept
            // by wrapping, not by a division (a few a row, by a number known only at run time).
            var first = 0
            let base = UnsafePointer(ring)
            @inline(__always) func slot(_ ky: Int) -> Int { first &+ ky < slots ? first &+ ky : first &+ ky &- slots }
            for oy in 0..<ho {
                // The next output row's last input row, an output row ahead: copied right before
                // its first use, it was read back through stores that had not reached L1 (a row
                // ahead took 0.64–0.76 of the time, Zen 5, same process, alternating).
                if oy + 1 < ho { load(oy + kh - padH, into: slot(kh)) }
                let out = yc + oy * wo, res = rc.map { $0 + oy * wo }
                let s0 = base + slot(0) &* pitch, s1 = base + slot(1) &* pitch, s2 = base + slot(2) &* pitch
                defer { first = slot(1) }
                /// Output columns ox ..< ox + n, finished: each kernel row's taps summed on their own
                /// (one chain of kH · kW dependent multiply-adds a vector was latency-bound), 3×3
                /// written out (the loops were not unrolled).
                @inline(__always) func sum(_ ox: Int) -> V {
                    if three {
                        let (p0, p1, p2) = (s0 + ox, s1 + ox, s2 + ox)
                        var a = V(repeating: wc[0]) * p0.vector(0)
                        var b1 = V(repeating: wc[3]) * p1.vector(0)
                        var c = V(repeating: wc[6]) * p2.vector(0)
                        a = a.addingProduct(V(repeating: wc[1]), p0.vector(1))
                        b1 = b1.addingProduct(V(repeating: wc[4]), p1.vector(1))
                        c = c.addingProduct(V(repeating: wc[7]), p2.vector(1))
                        a = a.addingProduct(V(repeating: wc[2]), p0.vector(2))
                        b1 = b1.addingProduct(V(repeating: wc[5]), p1.vector(2))
                        c = c.addingProduct(V(repeating: wc[8]), p2.vector(2))
                        return f(a + b1 + c + b)
                    }
                    var total = V()
                    for ky in 0..<kh {
                        let r: UnsafePointer<Float> = base + (slot(ky) &* pitch &+ ox)
                        let t = ky &* kw
                        var s = V(repeating: wc[t]) * r.vector(0)
                        for kx in 1..<kw { s = s.addingProduct(V(repeating: wc[t &+ kx]), r.vector(kx)) }
                        total += s
                    }
                    return f(total + b)
                }
                @inline(__always) func put(_ v: V, _ ox: Int) {
                    out.store(res.map { v + $0.vector(ox) } ?? v, at: ox)
                }
                // Four vectors at a time (independent chains), the last ones with the n ending at
                // Wo (lanes already stored rewritten with the same values) side by side too: one
                // by one, each a long chain of dependent operations, they were latency-bound on
                // the rows of 20 and 40; a row narrower than a vector lane by lane.
                var ox = 0
                while ox &+ 4 &* n <= wo {
                    let (v0, v1, v2, v3) = (sum(ox), sum(ox &+ n), sum(ox &+ 2 &* n), sum(ox &+ 3 &* n))
                    put(v0, ox); put(v1, ox &+ n); put(v2, ox &+ 2 &* n); put(v3, ox &+ 3 &* n)
                    ox &+= 4 &* n
                }
                guard ox < wo else { continue }
                if wo >= n {
                    // At most three whole vectors and the one ending at Wo are left.
                    let last = wo &- n
                    let (p1, p2) = (min(ox &+ n, last), min(ox &+ 2 &* n, last))
                    if p2 < last {
                        let (v0, v1, v2, v3) = (sum(ox), sum(p1), sum(p2), sum(last))
                        put(v0, ox); put(v1, p1); put(v2, p2); put(v3, last)
                    } else if p1 < last {
                        let (v0, v1, v2) = (sum(ox), sum(p1), sum(last))
                        put(v0, ox); put(v1, p1); put(v2, last)
                    } else if ox < last {
                        let (v0, v1) = (sum(ox), sum(last))
                        put(v0, ox); put(v1, last)
                    } else {
                        put(sum(last), last)
                    }
                } else {
                    let v = sum(0)
                    for i in 0..<wo { out[i] = v[i] + (res?[i] ?? 0) }
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

import CTargetFeatures

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

    /// Blocks of at most about 256 K floats of planes (1 MB), to stay in a core's L2 while the
    /// GEMM reads them, and no smaller (each block lays out the kernel's reach rows again).
    init(channels: Int, h: Int, w: Int, ho: Int, threads: Int, _ p: Conv2DParameters) {
        (strideH, strideW, padH, padW, self.h, self.w, self.channels) = (p.strideH, p.strideW, p.padH, p.padW, h, w, channels)
        width = (w + 2 * p.padW + p.strideW - 1) / p.strideW
        let reach = (p.kernelH - 1) / p.strideH
        let perRow = channels * p.strideH * p.strideW * width
        // As many blocks as the budget needs, rounded up to a multiple of the threads so each
        // gets the same share.
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
        // the other would read every stride-th row, which the prefetcher follows less well.
        for c in 0..<channels {
            let out = planes + c * channelStride
            for row in 0..<height {
                for py in 0..<strideH {
                    let iy = (first + row) * strideH + py - padH
                    let source = iy >= 0 && iy < h ? x + (c * h + iy) * w : nil
                    let o = out + py * strideW * planeSize + row * width
                    // The input row two on, into L1: the fill would wait on its first loads of each row.
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
    /// permutes. One pass for both phases, so each input row is read once.
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

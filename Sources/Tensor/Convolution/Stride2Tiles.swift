import CTargetFeatures

/// 3×3 stride-2 padding-1 convolutions of one group on 2×2 output tiles: Winograd's F(2, 2) along
/// both axes. Along either axis, outputs 2i and 2i + 1 read inputs 4i − 1 … 4i + 3 = (x₀ … x₄),
/// and with w₀, w₁, w₂ the filter,
///
///     y₀ = w₀ (x₀ − x₂) + w₁ x₁ + (w₀ + w₂) x₂,    y₁ = w₂ (x₄ − x₂) + w₁ x₃ + (w₀ + w₂) x₂:
///
/// five points, 0 and 1 for y₀ only, 3 and 4 for y₁ only, 2 shared. Over both axes, 25 products
/// per tile and channel pair instead of 36, coefficients ±1. The products are summed by nine
/// GEMMs, one per pair of (row, column) point classes (own to output 0, own to output 1, shared),
/// each over the class pairs' points of every input channel (K = 4, 2 or 1 × Cin): output (r, c)
/// is G(r, c) + G(r, shared) + G(shared, c) + G(shared, shared).
enum Stride2Tiles {
    /// The points of each class: own to output 0, own to output 1, shared.
    static let classes = [[0, 1], [3, 4], [2]]
    /// G (5 × 3): the points' filter rows.
    static let g: [[Double]] = [[1, 0, 0], [0, 1, 0], [1, 0, 1], [0, 0, 1], [0, 1, 0]]
    /// Points per input channel of GEMM 3i + j (classes i of the rows, j of the columns), and the
    /// points of the GEMMs before it.
    static let sizes = [4, 4, 2, 4, 4, 2, 2, 2, 1], offsets = [0, 4, 8, 10, 14, 18, 20, 22, 24]
    /// Point (p, q)'s GEMM and its index among that GEMM's points of one channel.
    static let slot: [[(gemm: Int, index: Int)]] = (0..<5).map { p in
        (0..<5).map { q in
            let (i, j) = (classes.firstIndex { $0.contains(p) }!, classes.firstIndex { $0.contains(q) }!)
            return (3 * i + j, classes[i].firstIndex(of: p)! * classes[j].count + classes[j].firstIndex(of: q)!)
        }
    }

    /// Weight [Cout, Cin, 3, 3] as the nine GEMMs' panels one after the other, each
    /// [⌈Cout/8⌉][sizes · Cin][8], step sizes · c + index (U = G g Gᵀ in Double, rounded once).
    static func panels(_ weight: Tensor) -> [Float] {
        let (cout, cin) = (weight.shape[0], weight.shape[1]), tiles = (cout + 7) / 8
        var packed = [Float](repeating: 0, count: tiles * 25 * cin * 8)
        for o in 0..<cout {
            let (t, lane) = o.quotientAndRemainder(dividingBy: 8)
            for c in 0..<cin {
                let f = (0..<9).map { Double(weight.scalars[(o * cin + c) * 9 + $0]) }
                for p in 0..<5 {
                    for q in 0..<5 {
                        var u = 0.0
                        for a in 0..<3 {
                            for b in 0..<3 { u += g[p][a] * f[3 * a + b] * g[q][b] }
                        }
                        let (gemm, index) = slot[p][q], k = sizes[gemm] * cin
                        packed[(tiles * offsets[gemm] * cin + t * k + sizes[gemm] * c + index) * 8 + lane] = Float(u)
                    }
                }
            }
        }
        return packed
    }
}

/// y [Cout, Ho, Wo] = epilogue(conv(x [Cin, H, W], 3×3, stride 2, padding 1)) from
/// `Stride2Tiles.panels` weights, on the GEMM's register tiles `tiles`. The GEMMs' columns are the
/// output's 2×2 tiles (tile row t, column s: column t · ⌈Wo/2⌉ + s), split among the threads in
/// strips as wide as the register tile.
func stride2TilesConv2d(_ x: UnsafePointer<Float>, channels cin: Int, h: Int, w: Int, weight: UnsafePointer<Float>,
                        outputs cout: Int, _ y: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>,
                        activation: Activation, residual: UnsafePointer<Float>?, threads: Int, scratch: Scratch,
                        tiles: TileGeometry = .target) {
    switch tiles {
    case .avx512:
        stride2TilesConv2d(Row48.self, Row16.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                           activation: activation, residual: residual, threads: threads, scratch: scratch)
    case .avx2:
        stride2TilesConv2d(Row24.self, Row8.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                           activation: activation, residual: residual, threads: threads, scratch: scratch)
    }
}

@inline(__always)
private func stride2TilesConv2d<R: TileRow, Narrow: TileRow>(
    _: R.Type, _: Narrow.Type, _ x: UnsafePointer<Float>, channels cin: Int, h: Int, w: Int, weight: UnsafePointer<Float>,
    outputs cout: Int, _ y: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>, activation: Activation,
    residual: UnsafePointer<Float>?, threads: Int, scratch: Scratch
) {
    let (ho, wo) = ((h + 1) / 2, (w + 1) / 2), (th, tw) = ((ho + 1) / 2, (wo + 1) / 2)
    // Input channels a pass of the wide strips: their 25 rows of B each, read by every row tile.
    let depth = max(1, stride2TilesPanelFloats / (25 * R.width))
    // Each thread's panel, then the nine GEMMs' sums (M × R.width each).
    let perThread = (25 * depth + 9 * ((cout + 7) / 8 * 8)) * R.width
    // A strip a part, claimed as threads come free: with a few large parts a thread, one thread
    // waits for another's last part wherever the system slows a core.
    let parts = Parallel.ranges(th * tw, parts: th * tw, align: R.width), workers = min(threads, parts.count)
    let (buffers, _) = scratch.take(floats: workers * perThread)
    Parallel.forEach(parts.count, threads: workers, Stride2TileParts<R, Narrow>(
        x: Address(x), y: Address(y), residual: residual.map { Address($0) }, weight: Address(weight),
        bias: Address(bias), scratch: Address(buffers), perThread: perThread, parts: parts, activation: activation,
        cin: cin, h: h, w: w, ho: ho, wo: wo, tw: tw, cout: cout, depth: depth))
}

/// Floats of B one pass of a strip reads, the nine GEMMs' rows together: 256 KB, 54 input channels
/// of 48-column strips, in L2: a pass the size of L1 leaves each GEMM a few steps, and each
/// reloads its sums every pass.
let stride2TilesPanelFloats = 65536

/// `stride2TilesConv2d`'s parts: ranges of its GEMMs' columns, run with their thread's scratch.
private struct Stride2TileParts<R: TileRow, Narrow: TileRow>: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    let scratch: Address<Float>
    let perThread: Int
    let parts: Partition
    let activation: Activation
    let cin: Int, h: Int, w: Int, ho: Int, wo: Int, tw: Int, cout: Int, depth: Int

    func run(part: Int, thread t: Int) {
        let columns = parts[part]
        var j = columns.lowerBound
        while columns.upperBound - j > 2 * Narrow.width {
            strip(R.self, from: j, count: min(R.width, columns.upperBound - j), thread: t)
            j += R.width
        }
        while columns.upperBound - j > Row8.width {
            strip(Narrow.self, from: j, count: min(Narrow.width, columns.upperBound - j), thread: t)
            j += Narrow.width
        }
        // The last ≤ 8 in an 8-wide strip, on column tiles (20×20 outputs: 100 tiles, 48 + 48 + 4).
        if j < columns.upperBound { strip(Row8.self, from: j, count: columns.upperBound - j, thread: t) }
    }

    /// GEMM columns `j ..< j + count` (count ≤ S.width) into the output.
    @inline(__always)
    private func strip<S: TileRow>(_: S.Type, from j: Int, count: Int, thread t: Int) {
        let panel = scratch.pointer + t * perThread, padded = (cout + 7) / 8 * 8
        let sums = panel + 25 * depth * R.width
        let plain = Epilogue(bias: bias.pointer, activation: .none, residual: nil)
        let perPass = max(1, depth * R.width / S.width)
        // A GEMM's panels follow one another, 8 · size · cin floats apart; the next GEMM reads its
        // own at another rate. The reductions are short, so the prefetches pay only on weights
        // four times `streamedWeightBytes`.
        let streams = 4 * 25 * padded * cin >= 4 * streamedWeightBytes
        for c0 in stride(from: 0, to: cin, by: perPass) {
            let channels = c0..<min(cin, c0 + perPass), n = channels.count
            pack(S.self, channels, column: j, count: count, into: panel)
            // GEMM by GEMM over all row tiles: the row tiles read one GEMM's B rows (at most 4 of a
            // channel's 25) one after the other, rather than each the whole panel.
            for gemm in 0..<9 {
                let size = Stride2Tiles.sizes[gemm], offset = Stride2Tiles.offsets[gemm]
                let steps = size * c0..<size * (c0 + n), a = weight.pointer + padded * offset * cin
                let (b, c) = (panel + offset * n * S.width, sums + gemm * padded * S.width)
                // Never the last step: the sums stay raw for the output pass below.
                if S.width == Row8.width {
                    columnTiles(rows: cout, count: count, steps: steps, k: size * cin, a: a, b: b, ldb: S.width, c: c,
                                ldc: S.width)
                    continue
                }
                for row in stride(from: 0, to: cout, by: S.rows) {
                    tile(S.self, steps: steps, of: .max, a: a + row / 8 * 8 * size * cin + row % 8, b: b,
                         rows: row..<min(cout, row + S.rows), c: c, ldc: S.width, column: 0, plain, staging: nil,
                         ahead: streams && (row / 8 + 1) * 8 < cout ? 8 * size * cin : 0)
                }
            }
        }
        finish(S.self, sums, column: j, count: count)
    }

    /// B's rows for input channels `channels` at GEMM columns `j ..< j + count`, zeros past them:
    /// each GEMM's points of every channel, the GEMMs one after the other.
    @inline(__always)
    private func pack<S: TileRow>(_: S.Type, _ channels: Range<Int>, column j: Int, count: Int,
                                  into panel: UnsafeMutablePointer<Float>) {
        let n = channels.count, width = S.width
        /// Point (p, q)'s row of channel k.
        @inline(__always) func row(_ p: Int, _ q: Int, _ k: Int) -> UnsafeMutablePointer<Float> {
            let (gemm, index) = Stride2Tiles.slot[p][q]
            return panel + (Stride2Tiles.offsets[gemm] * n + Stride2Tiles.sizes[gemm] * k + index) * width
        }
        var q = 0
        while q < count {
            let (t, s) = (j + q).quotientAndRemainder(dividingBy: tw)
            let length = min(tw - s, count - q)
            for c in channels {
                let k = c - channels.lowerBound
                @inline(__always) func rows(_ p: Int) -> Taps {
                    (row(p, 0, k) + q, row(p, 1, k) + q, row(p, 2, k) + q, row(p, 3, k) + q, row(p, 4, k) + q)
                }
                @inline(__always) func input(_ r: Int) -> UnsafePointer<Float>? {
                    let iy = 4 * t - 1 + r
                    return iy >= 0 && iy < h ? UnsafePointer(x.pointer + (c * h + iy) * w) : nil
                }
                // Two channels on, into L1: the taps would wait on their loads.
                if c + 2 < channels.upperBound { prefetch(c + 2, t, s, length) }
                // The input rows 4t − 1 + r are the points' rows x₀ − x₂, x₁, x₂, x₄ − x₂, x₃: x₂ first.
                let x2 = rows(2)
                stride2TileTaps(input(2), w: w, from: s, length, x2, minus: nil)
                stride2TileTaps(input(0), w: w, from: s, length, rows(0), minus: x2)
                stride2TileTaps(input(1), w: w, from: s, length, rows(1), minus: nil)
                stride2TileTaps(input(4), w: w, from: s, length, rows(3), minus: x2)
                stride2TileTaps(input(3), w: w, from: s, length, rows(4), minus: nil)
            }
            q += length
        }
        if count < width {
            for r in 0..<(25 * n) { (panel + r * width + count).initialize(repeating: 0, count: width - count) }
        }
    }

    /// Input channel c's rows 4t − 1 … 4t + 3 at tile columns s ..< s + length, into L1.
    @inline(__always)
    private func prefetch(_ c: Int, _ t: Int, _ s: Int, _ length: Int) {
        for r in 0..<5 {
            let row = x.pointer + (c * h + 4 * t - 1 + r) * w + 4 * s - 1
            for o in stride(from: 0, to: 4 * length + 1, by: 16) { prefetchL1(row + o) }
        }
    }

    /// y at the strip's columns: output (r, c) of a tile is activation(G(r, c) + G(r, shared) +
    /// G(shared, c) + G(shared, shared) + bias), then + residual. Channel by channel, combined then
    /// interleaved while its sums are in L1 (all the sums are up to 9 · 512 · 48 floats, in L2).
    @inline(__always)
    private func finish<S: TileRow>(_: S.Type, _ sums: UnsafeMutablePointer<Float>, column j: Int, count: Int) {
        let padded = (cout + 7) / 8 * 8
        @inline(__always) func gemm(_ i: Int) -> UnsafeMutablePointer<Float> { sums + i * padded * S.width }
        @inline(__always) func outputs<V: FloatVector, F: ActivationFunction>(_: V.Type, _: F.Type, channel o: Int) {
            let at = o * S.width, b = bias.pointer[o]
            for i in stride(from: 0, to: S.width, by: V.scalarCount) {
                @inline(__always) func m(_ g: Int) -> V { UnsafePointer(gemm(g)).vector(at + i) }
                let shared = m(8) + b, top = m(2) + shared, bottom = m(5) + shared
                let (left, right) = (m(6), m(7))
                gemm(0).store(F.apply(m(0) + top + left), at: at + i)
                gemm(1).store(F.apply(m(1) + top + right), at: at + i)
                gemm(3).store(F.apply(m(3) + bottom + left), at: at + i)
                gemm(4).store(F.apply(m(4) + bottom + right), at: at + i)
            }
        }
        @inline(__always) func outputs<V: FloatVector>(_: V.Type, channel o: Int) {
            switch activation {
            case .none: outputs(V.self, Identity.self, channel: o)
            case .silu: outputs(V.self, SiLU.self, channel: o)
            case .sigmoid: outputs(V.self, Sigmoid.self, channel: o)
            case .relu: outputs(V.self, ReLU.self, channel: o)
            case .leakyReLU: outputs(V.self, LeakyReLU.self, channel: o)
            }
        }
        let (t0, s0) = j.quotientAndRemainder(dividingBy: tw)
        for o in 0..<cout {
            if wideVectors && S.width % 16 == 0 {
                outputs(Vec16.self, channel: o)
            } else {
                outputs(Vec8.self, channel: o)
            }
            // Each tile's two columns interleaved into its two output rows, tile row by tile row.
            var (q, t, s) = (0, t0, s0)
            while q < count {
                let length = min(tw - s, count - q), columns = min(2 * length, wo - 2 * s)
                for r in 0..<min(2, ho - 2 * t) {
                    let at = (o * ho + 2 * t + r) * wo + 2 * s
                    let (even, odd) = (gemm(3 * r) + o * S.width + q, gemm(3 * r + 1) + o * S.width + q)
                    var i = 0
                    while 2 * i + 16 <= columns {
                        var v = Vec16()
                        (v.evenHalf, v.oddHalf) = (UnsafePointer(even).vector(i), UnsafePointer(odd).vector(i))
                        if let residual { v += UnsafePointer(residual.pointer).vec16(at + 2 * i) }
                        y.pointer.store(v, at: at + 2 * i)
                        i += 8
                    }
                    for c in (2 * i)..<columns {
                        y.pointer[at + c] = (c % 2 == 0 ? even : odd)[c / 2] + (residual?.pointer[at + c] ?? 0)
                    }
                }
                (q, t, s) = (q + length, t + 1, 0)
            }
        }
    }
}

/// Five rows of B.
typealias Taps = (UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>,
                  UnsafeMutablePointer<Float>, UnsafeMutablePointer<Float>)

/// The points' columns of one input row `src` (`w` wide; nil: a padding row) for tile columns
/// s₀ ..< s₀ + length into d, less `minus` (the x₂ row's, for rows x₀ − x₂ and x₄ − x₂): with
/// x_δ = src[4s − 1 + δ] (0 outside the row), x₀ − x₂, x₁, x₂, x₄ − x₂, x₃. 16 tiles at a time
/// from 64 floats split by two rounds of even and odd lanes, 8 from 32 where the row is narrower
/// (x₀ from the floats before, or shifted in at s = 0); one by one where those would read outside
/// the row.
@inline(never)
private func stride2TileTaps(_ src: UnsafePointer<Float>?, w: Int, from s0: Int, _ length: Int, _ d: Taps,
                             minus: Taps?) {
    @inline(__always) func put<V: FloatVector>(_ v: V, _ o: UnsafeMutablePointer<Float>,
                                               _ m: UnsafeMutablePointer<Float>?, _ i: Int) {
        o.store(m.map { v - UnsafePointer($0).vector(i) } ?? v, at: i)
    }
    @inline(__always) func store<V: FloatVector>(_ i: Int, _ x0: V, _ p0: V, _ p1: V, _ p2: V, _ p3: V) {
        put(x0 - p1, d.0, minus?.0, i)
        put(p0, d.1, minus?.1, i)
        put(p1, d.2, minus?.2, i)
        put(p3 - p1, d.3, minus?.3, i)
        put(p2, d.4, minus?.4, i)
    }
    guard let src else {
        @inline(__always) func negate(_ o: UnsafeMutablePointer<Float>, _ m: UnsafeMutablePointer<Float>?) {
            for i in 0..<length { o[i] = -(m?[i] ?? 0) }
        }
        negate(d.0, minus?.0)
        negate(d.1, minus?.1)
        negate(d.2, minus?.2)
        negate(d.3, minus?.3)
        negate(d.4, minus?.4)
        return
    }
    /// Phases 0 … 3 of the 64 floats from s.
    @inline(__always) func phases(_ s: UnsafePointer<Float>) -> (Vec16, Vec16, Vec16, Vec16) {
        let a = SIMD32(lowHalf: s.vec16(0), highHalf: s.vec16(16)), b = SIMD32(lowHalf: s.vec16(32), highHalf: s.vec16(48))
        let even = SIMD32(lowHalf: a.evenHalf, highHalf: b.evenHalf), odd = SIMD32(lowHalf: a.oddHalf, highHalf: b.oddHalf)
        return (even.evenHalf, odd.evenHalf, even.oddHalf, odd.oddHalf)
    }
    /// Phases 0 … 3 of the 32 floats from s.
    @inline(__always) func phases8(_ s: UnsafePointer<Float>) -> (Vec8, Vec8, Vec8, Vec8) {
        let a = SIMD32(lowHalf: s.vec16(0), highHalf: s.vec16(16))
        return (a.evenHalf.evenHalf, a.oddHalf.evenHalf, a.evenHalf.oddHalf, a.oddHalf.oddHalf)
    }
    @inline(__always) func vector(_ i: Int) {
        let s = s0 + i, base = src + 4 * s
        let (p0, p1, p2, p3) = phases(base)
        store(i, s == 0 ? lanesShiftedUp(p3) : phases(base - 4).3, p0, p1, p2, p3)
    }
    @inline(__always) func vector8(_ i: Int) {
        let s = s0 + i, base = src + 4 * s
        let (p0, p1, p2, p3) = phases8(base)
        var x0 = Vec8()
        if s == 0 {
            x0 = Vec8(lowHalf: SIMD4(0, p3[0], p3[1], p3[2]), highHalf: SIMD4(p3[3], p3[4], p3[5], p3[6]))
        } else {
            x0 = phases8(base - 4).3
        }
        store(i, x0, p0, p1, p2, p3)
    }
    // The last tile columns a vector may start at: 64 (32) floats from 4s in the row.
    let limit = w >= 64 ? (w - 64) / 4 : -1, limit8 = w >= 32 ? (w - 32) / 4 : -1
    var i = 0
    /// `n` tiles at a time from i, then the last `n` over some already written.
    @inline(__always) func sweep(_ n: Int, limit: Int, _ vector: (Int) -> Void) {
        while i + n <= length && s0 + i <= limit {
            vector(i)
            i += n
        }
        if i < length && length >= n && s0 + length - n <= limit {
            vector(length - n)
            i = length
        }
    }
    sweep(16, limit: limit, vector)
    sweep(8, limit: limit8, vector8)
    @inline(__always) func x(_ ix: Int) -> Float { ix >= 0 && ix < w ? src[ix] : 0 }
    for i in i..<length {
        let ix = 4 * (s0 + i) - 1
        let v = (x(ix) - x(ix + 2), x(ix + 1), x(ix + 2), x(ix + 4) - x(ix + 2), x(ix + 3))
        (d.0[i], d.1[i], d.2[i], d.3[i], d.4[i]) = (v.0 - (minus?.0[i] ?? 0), v.1 - (minus?.1[i] ?? 0),
                                                    v.2 - (minus?.2[i] ?? 0), v.3 - (minus?.3[i] ?? 0),
                                                    v.4 - (minus?.4[i] ?? 0))
    }
}

import CTargetFeatures

/// 3×3 stride-2 padding-1 convolutions of one group, two output rows at a time. Output rows 2t and
/// 2t + 1 read input rows 4t − 1 … 4t + 3 = (d₀, e₀, d₁, e₁, d₂) through the kernel rows W₀, W₁, W₂
/// (each a 1×3 filter over the row's columns, stride 2):
///
///     y[2t]     = W₀ d₀ + W₁ e₀ + W₂ d₁ = W₀ (d₀ − d₁) + W₁ e₀ + (W₀ + W₂) d₁
///     y[2t + 1] = W₀ d₁ + W₁ e₁ + W₂ d₂ = W₂ (d₂ − d₁) + W₁ e₁ + (W₀ + W₂) d₁
///
/// Winograd's F(2, 2) along the rows: the product with d₁ is shared, 15 multiply-adds per input
/// channel and output pair where the direct convolution takes 18, and the transforms are two
/// subtractions on the input and one addition on the output (coefficients ±1: a few roundings).
enum Stride2Pairs {
    /// Whether weights of `shape` for `p` take this layout: 64 or more output channels (with 32,
    /// yolo26n's model.1 and its 4 row tiles, the phase planes' GEMM was as fast). Its weights
    /// take 15/9 of the direct layout's memory: 1.8 MB more for yolo26n.
    static func fits(_ shape: [Int], _ p: Conv2DParameters) -> Bool {
        p == Conv2DParameters(kernel: 3, stride: 2, padding: 1) && shape[0] >= 64
    }

    /// Weight [Cout, Cin, 3, 3] as three sets of GEMM panels [⌈Cout/8⌉][K][8]: W₀ + W₂ (K = 3 Cin, step
    /// 3c + kx; the sum in Double, rounded once), then [W₀ | W₁] and [W₂ | W₁] (K = 6 Cin, step
    /// 6c + 3i + kx).
    static func panels(_ weight: Tensor) -> [Float] {
        let (cout, cin) = (weight.shape[0], weight.shape[1]), tiles = (cout + 7) / 8
        let shared = tiles * 3 * cin * 8, pair = tiles * 6 * cin * 8
        var packed = [Float](repeating: 0, count: shared + 2 * pair)
        for o in 0..<cout {
            let (t, lane) = o.quotientAndRemainder(dividingBy: 8)
            for c in 0..<cin {
                for kx in 0..<3 {
                    func w(_ ky: Int) -> Float { weight.scalars[((o * cin + c) * 3 + ky) * 3 + kx] }
                    packed[(t * 3 * cin + 3 * c + kx) * 8 + lane] = Float(Double(w(0)) + Double(w(2)))
                    packed[shared + (t * 6 * cin + 6 * c + kx) * 8 + lane] = w(0)
                    packed[shared + (t * 6 * cin + 6 * c + 3 + kx) * 8 + lane] = w(1)
                    packed[shared + pair + (t * 6 * cin + 6 * c + kx) * 8 + lane] = w(2)
                    packed[shared + pair + (t * 6 * cin + 6 * c + 3 + kx) * 8 + lane] = w(1)
                }
            }
        }
        return packed
    }
}

/// y [Cout, Ho, Wo] = epilogue(conv(x [Cin, H, W], 3×3, stride 2, padding 1)) from
/// `Stride2Pairs.panels` weights, on the GEMM's register tiles `tiles`. The GEMMs' columns are
/// the output's pairs of rows (pair t, column ox: column t · Wo + ox), split among the threads
/// in strips as wide as the register tile.
func stride2PairsConv2d(_ x: UnsafePointer<Float>, channels cin: Int, h: Int, w: Int, weight: UnsafePointer<Float>,
                        outputs cout: Int, _ y: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>,
                        activation: Activation, residual: UnsafePointer<Float>?, threads: Int, scratch: Scratch,
                        tiles: TileGeometry = .target) {
    switch tiles {
    case .avx512:
        stride2PairsConv2d(Row48.self, Row16.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                           activation: activation, residual: residual, threads: threads, scratch: scratch)
    case .avx2:
        stride2PairsConv2d(Row24.self, Row8.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                           activation: activation, residual: residual, threads: threads, scratch: scratch)
    }
}

@inline(__always)
private func stride2PairsConv2d<R: TileRow, Narrow: TileRow>(
    _: R.Type, _: Narrow.Type, _ x: UnsafePointer<Float>, channels cin: Int, h: Int, w: Int, weight: UnsafePointer<Float>,
    outputs cout: Int, _ y: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>, activation: Activation,
    residual: UnsafePointer<Float>?, threads: Int, scratch: Scratch
) {
    let (ho, wo) = ((h + 1) / 2, (w + 1) / 2), columns = (ho + 1) / 2 * wo
    // Input channels a pass of the wide strips: their 15 rows of B each, read by every row tile.
    let depth = max(1, stride2PairsPanelFloats / (15 * R.width))
    // Each thread's panel, then the three GEMMs' sums (M × R.width each).
    let perThread = (15 * depth + 3 * ((cout + 7) / 8 * 8)) * R.width
    // Parts for threads to claim as they come free.
    let parts = Parallel.ranges(columns, parts: 4 * threads, align: R.width), workers = min(threads, parts.count)
    let (buffers, _) = scratch.take(floats: workers * perThread)
    Parallel.forEach(parts.count, threads: workers, Stride2PairParts<R, Narrow>(
        x: Address(x), y: Address(y), residual: residual.map { Address($0) }, weight: Address(weight),
        bias: Address(bias), scratch: Address(buffers), perThread: perThread, parts: parts, activation: activation,
        cin: cin, h: h, w: w, ho: ho, wo: wo, cout: cout, depth: depth))
}

/// Floats of B one pass of a strip reads, the three GEMMs' rows together: 64 KB where L1 holds
/// 48 KB (Zen 5, alternating: 0.97–0.99 of the time of 32 KB on yolo26n's shapes, 96 and 128 KB
/// no better).
let stride2PairsPanelFloats = 2 * panelFloats

/// `stride2PairsConv2d`'s parts: ranges of its GEMMs' columns, run with their thread's scratch.
private struct Stride2PairParts<R: TileRow, Narrow: TileRow>: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    let scratch: Address<Float>
    let perThread: Int
    let parts: Partition
    let activation: Activation
    let cin: Int, h: Int, w: Int, ho: Int, wo: Int, cout: Int, depth: Int

    func run(part: Int, thread t: Int) {
        let columns = parts[part]
        var j = columns.lowerBound
        // The last ≤ 32 columns (AVX2: 16) on narrow strips.
        while columns.upperBound - j > 2 * Narrow.width {
            strip(R.self, from: j, count: min(R.width, columns.upperBound - j), thread: t)
            j += R.width
        }
        while j < columns.upperBound {
            strip(Narrow.self, from: j, count: min(Narrow.width, columns.upperBound - j), thread: t)
            j += Narrow.width
        }
    }

    /// GEMM columns `j ..< j + count` (count ≤ S.width) into the output.
    @inline(__always)
    private func strip<S: TileRow>(_: S.Type, from j: Int, count: Int, thread t: Int) {
        // The panel and sums as laid out for R, which hold those of S.
        let panel = scratch.pointer + t * perThread, padded = (cout + 7) / 8 * 8
        let shared = panel + 15 * depth * R.width, first = shared + padded * S.width, second = first + padded * S.width
        let sharedWeights = weight.pointer, pairWeights = weight.pointer + padded * 3 * cin
        let plain = Epilogue(bias: bias.pointer, activation: .none, residual: nil)
        let perPass = max(1, depth * R.width / S.width)
        for c0 in stride(from: 0, to: cin, by: perPass) {
            let channels = c0..<min(cin, c0 + perPass), n = channels.count
            pack(S.self, channels, column: j, count: count, into: panel)
            for row in stride(from: 0, to: cout, by: S.rows) {
                let rows = row..<min(cout, row + S.rows)
                // Never the last step: the sums stay raw for the output transform below.
                tile(S.self, steps: 3 * c0..<3 * (c0 + n), of: .max, a: sharedWeights + row / 8 * 8 * 3 * cin + row % 8,
                     b: panel, rows: rows, c: shared, ldc: S.width, column: 0, plain, staging: nil)
                tile(S.self, steps: 6 * c0..<6 * (c0 + n), of: .max, a: pairWeights + row / 8 * 8 * 6 * cin + row % 8,
                     b: panel + 3 * n * S.width, rows: rows, c: first, ldc: S.width, column: 0, plain, staging: nil)
                tile(S.self, steps: 6 * c0..<6 * (c0 + n), of: .max,
                     a: pairWeights + padded * 6 * cin + row / 8 * 8 * 6 * cin + row % 8,
                     b: panel + 9 * n * S.width, rows: rows, c: second, ldc: S.width, column: 0, plain, staging: nil)
            }
        }
        finish(S.self, shared, first, second, column: j, count: count)
    }

    /// B's rows for input channels `channels` at GEMM columns `j ..< j + count`, zeros past them:
    /// d₁'s three taps a channel, then d₀ − d₁ and e₀'s, then d₂ − d₁ and e₁'s.
    @inline(__always)
    private func pack<S: TileRow>(_: S.Type, _ channels: Range<Int>, column j: Int, count: Int,
                                  into panel: UnsafeMutablePointer<Float>) {
        let n = channels.count, width = S.width
        var q = 0
        // A run of the strip's columns in one pair of output rows at a time.
        while q < count {
            let (pair, ox) = (j + q).quotientAndRemainder(dividingBy: wo)
            let length = min(wo - ox, count - q)
            for c in channels {
                let k = c - channels.lowerBound
                let shared = panel + 3 * k * width + q, first = panel + (3 * n + 6 * k) * width + q
                let second = first + 6 * n * width
                @inline(__always) func taps(_ r: Int, into d: UnsafeMutablePointer<Float>) {
                    let iy = 4 * pair - 1 + r
                    if iy >= 0 && iy < h {
                        stride2Taps(x.pointer + (c * h + iy) * w, w: w, from: ox, length, d, d + width, d + 2 * width)
                    } else {
                        for kx in 0..<3 { (d + kx * width).initialize(repeating: 0, count: length) }
                    }
                }
                taps(2, into: shared)
                taps(0, into: first)
                taps(1, into: first + 3 * width)
                taps(4, into: second)
                taps(3, into: second + 3 * width)
            }
            q += length
        }
        if count < width {
            for r in 0..<(15 * n) { (panel + r * width + count).initialize(repeating: 0, count: width - count) }
        }
        // d₀ − d₁ and d₂ − d₁, whole rows at once.
        for k in 0..<n {
            let shared = panel + 3 * k * width, first = panel + (3 * n + 6 * k) * width, second = first + 6 * n * width
            for i in stride(from: 0, to: 3 * width, by: 8) {
                let d1: Vec8 = shared.vector(i)
                first.store(first.vector(i) - d1, at: i)
                second.store(second.vector(i) - d1, at: i)
            }
        }
        // The input two strips on, into L2 while this strip computes: too many rows for the
        // hardware prefetcher.
        let (pair, ox) = (j + 2 * width).quotientAndRemainder(dividingBy: wo)
        for c in channels {
            for r in 0..<5 {
                let ahead = x.pointer + (c * h + 4 * pair - 1 + r) * w + 2 * ox - 1
                for o in stride(from: 0, to: 2 * width, by: 16) { prefetchL2(ahead + o) }
            }
        }
    }

    /// y at the strip's columns: activation(first + shared + bias) in output row 2t, the same of
    /// second in row 2t + 1 (when the output has it), then + residual.
    @inline(__always)
    private func finish<S: TileRow>(_: S.Type, _ shared: UnsafePointer<Float>, _ first: UnsafeMutablePointer<Float>,
                        _ second: UnsafeMutablePointer<Float>, column j: Int, count: Int) {
        @inline(__always) func sums<V: FloatVector, F: ActivationFunction>(_: V.Type, _: F.Type) {
            for o in 0..<cout {
                let at = o * S.width, b = bias.pointer[o]
                for i in stride(from: 0, to: S.width, by: V.scalarCount) {
                    let s: V = shared.vector(at + i) + b
                    first.store(F.apply(first.vector(at + i) + s), at: at + i)
                    second.store(F.apply(second.vector(at + i) + s), at: at + i)
                }
            }
        }
        // One loop per activation, so that it is inlined.
        @inline(__always) func sums<V: FloatVector>(_: V.Type) {
            switch activation {
            case .none: sums(V.self, Identity.self)
            case .silu: sums(V.self, SiLU.self)
            case .sigmoid: sums(V.self, Sigmoid.self)
            }
        }
        if wideVectors && S.width % 16 == 0 { sums(Vec16.self) } else { sums(Vec8.self) }
        var q = 0
        while q < count {
            let (pair, ox) = (j + q).quotientAndRemainder(dividingBy: wo)
            let length = min(wo - ox, count - q)
            for o in 0..<cout {
                for i in 0..<min(2, ho - 2 * pair) {
                    let at = (o * ho + 2 * pair + i) * wo + ox
                    copy((i == 0 ? first : second) + o * S.width + q, length, to: y.pointer + at,
                         adding: residual.map { UnsafePointer($0.pointer + at) })
                }
            }
            q += length
        }
    }
}

/// Output columns ox0 ..< ox0 + length of the taps kx = 0, 1, 2 of a stride-2 padding-1 row
/// (x[2ox − 1 + kx], 0 outside) into d0, d1, d2, from input row `src`, `w` wide: 16 at a time, the
/// last 16 again over some already written, and one by one where 16 would read outside the row.
/// The 32 floats from src[2ox] hold kx = 1 in their even lanes and kx = 2 in their odd ones, those
/// from src[2ox − 1] kx = 0 in their even ones. A call, so that its shuffles stay inlined in it
/// (inlined five times into `Stride2PairParts.pack`, `evenHalf` became a call a vector).
@inline(never)
private func stride2Taps(_ src: UnsafePointer<Float>, w: Int, from ox0: Int, _ length: Int,
                         _ d0: UnsafeMutablePointer<Float>, _ d1: UnsafeMutablePointer<Float>,
                         _ d2: UnsafeMutablePointer<Float>) {
    @inline(__always) func pairs(_ s: UnsafePointer<Float>) -> SIMD32<Float> {
        SIMD32(lowHalf: s.vec16(0), highHalf: s.vec16(16))
    }
    /// Columns i ..< i + 16: they read src[2ox − 1 ..< 2ox + 32], src[0 ..< 32] at ox = 0.
    @inline(__always) func vector(_ i: Int) {
        let ox = ox0 + i, s = src + 2 * ox, taps12 = pairs(s)
        d0.store(ox == 0 ? lanesShiftedUp(taps12.oddHalf) : pairs(s - 1).evenHalf, at: i)
        d1.store(taps12.evenHalf, at: i)
        d2.store(taps12.oddHalf, at: i)
    }
    // The last output column a vector may start at.
    let limit = w >= 32 ? (w - 32) / 2 : -1
    var i = 0
    while i + 16 <= length && ox0 + i <= limit {
        vector(i)
        i += 16
    }
    if i < length && length >= 16 && ox0 + length - 16 <= limit {
        vector(length - 16)
        i = length
    }
    for i in i..<length {
        let ix = 2 * (ox0 + i)
        d0[i] = ix > 0 ? src[ix - 1] : 0
        d1[i] = src[ix]
        d2[i] = ix + 1 < w ? src[ix + 1] : 0
    }
}

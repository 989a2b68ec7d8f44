import CTargetFeatures
import _Builtin_intrinsics.intel

/// What `int8GEMM` does to each Int32 sum s of row r before storing it:
/// activation(Float(s − offsets[r]) · scales[r] + bias[r]), then + the residual. With u8
/// activations of zero point z and s8 weights, offsets[r] = z · Σ weights of r makes s − offsets[r]
/// the exact integer dot product of the weights with the activations minus z, and scales[r] =
/// activation scale · weight scale.
package struct Int8Epilogue {
    let offsets: UnsafePointer<Int32>
    let scales: UnsafePointer<Float>
    let bias: UnsafePointer<Float>
    let activation: Activation

    package init(offsets: UnsafePointer<Int32>, scales: UnsafePointer<Float>, bias: UnsafePointer<Float>,
                 activation: Activation) {
        (self.offsets, self.scales, self.bias, self.activation) = (offsets, scales, bias, activation)
    }

    /// Rows `rows` of C (leading dimension `ldc`), `width` floats (a multiple of 8) from the
    /// sums + bias at `sums` (row `rows.lowerBound + i` at `sums + i · ld`): activation, then +
    /// the residual (C's layout), by `finishRows` as `Epilogue.finish`; SiLU and the sigmoid
    /// coarse (`CoarseSiLU`), since quantization already moves the sums by far more. Each vector
    /// stored also goes to `seen`.
    /// Inlined into the tile, so no tile pays a call's prologue and a reload of SiLU's constants.
    @inline(__always)
    func finish<O: StoreObserver>(rows: Range<Int>, sums: UnsafePointer<Float>, ld: Int, c: UnsafeMutablePointer<Float>,
                                  ldc: Int, width: Int, residual: UnsafePointer<Float>?, _ seen: inout O) {
        switch activation {
        case .none: finishRows(Vec8.self, Identity.self, rows, sums, ld, c, ldc, width, residual, &seen)
        case .silu: finishRows(Vec8.self, CoarseSiLU.self, rows, sums, ld, c, ldc, width, residual, &seen)
        case .sigmoid: finishRows(Vec8.self, CoarseSigmoid.self, rows, sums, ld, c, ldc, width, residual, &seen)
        case .relu: finishRows(Vec8.self, ReLU.self, rows, sums, ld, c, ldc, width, residual, &seen)
        case .leakyReLU: finishRows(Vec8.self, LeakyReLU.self, rows, sums, ld, c, ldc, width, residual, &seen)
        }
    }

    /// Row `row`'s 8 sums as floats with the bias, before the activation, at `c`, and to `seen`.
    @inline(__always)
    func store<O: StoreObserver>(_ sums: __m256i, row: Int, at c: UnsafeMutablePointer<Float>, _ seen: inout O) {
        let v = offsetSumsToFloat(sums, offsets[row]) * scales[row] + bias[row]
        c.store(v, at: 0)
        seen.add(v)
    }
}

/// 1 / (1 + e⁻ˣ) with `exp`'s coarse polynomial and `vrcpps` alone (relative error 1.5·2⁻¹²):
/// about 5e-4 of the value in all, an eighth of the step that quantizing the next convolution's
/// input (1/255 of its range) makes. The loop around it is bound by the chain's latency, which
/// the precise `exp` and a Newton step would lengthen by five operations.
@inline(__always)
private func coarseSigmoid<V: FloatVector>(_ x: V) -> V {
    let d = 1 + exp(x, coarse: true, negated: true)
    guard V.scalarCount == 8 else { return 1 / d }
    return unsafeBitCast(reciprocalEstimate(unsafeBitCast(d, to: __m256.self)), to: V.self)
}

private enum CoarseSiLU: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { v * coarseSigmoid(v) }
}

private enum CoarseSigmoid: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { coarseSigmoid(v) }
}

/// C = epilogue(A · B) in exact integer arithmetic, for A: M rows of signed 7-bit weights in
/// `QuantizedConvWeights` panels ([⌈M/4⌉][steps][4 rows][4 bytes], |a| ≤ 63) and B: unsigned
/// bytes, four reduction indices a column, step i's row starting at `b + rows[i]` (UInt32s: a
/// convolution's quantized input, each row one kernel tap's view of it, read where it lies).
///
/// Computes B's columns `columns` (a grid of rows `runs.stride` wide) into C's: grid column q
/// is C's column q / stride · length + q % stride, and grid columns with q % stride ≥ length
/// are dropped. C and the residual (C's layout) have leading dimension `ldc`. B is read up to
/// 7 columns past the columns' end.
///
/// Columns go in strips of 16 or 8; a 4-row × 16-column tile keeps its 8 accumulators in
/// registers over the whole reduction: `dotAccumulate` adds the products of a column's 4 bytes
/// with the row's 4 weights to the Int32 sums, by `vpdpbusd` on VNNI builds, else `vpmaddubsw`
/// into Int16 pairs (255 · 63 · 2 < 2¹⁵: no saturation) and `vpmaddwd` by ones. A strip within
/// one run of C is finished straight into C; one across runs (or past the end) into `staging`,
/// then copied in pieces. `staging` holds 128 floats: that strip's tile, and a tile's sums while
/// the activation and residual finish them. The floats stored in C widen `extent` (8 lower
/// bounds, then 8 upper, lane by lane, by `vminps` and `vmaxps` as `quantizedConv2d`'s range
/// pass), taken from the registers they are stored from (a strip across runs: from staging plus
/// the residual, as `copy` adds them), so that the next convolution need not find its input's
/// range.
///
/// With a `panel` (`int8PanelBytes(steps:)`, 64-byte aligned), each strip first copies its B rows
/// there one after another, and its tiles read them from there: one stream instead of a row a
/// step, worth its copy where the rows are spread over a stride's phase planes and many tiles
/// read them.
package func int8GEMM(_ a: UnsafePointer<UInt32>, m: Int, steps: Int, b: UnsafePointer<UInt32>, rows: UnsafePointer<Int>,
                      columns: Range<Int>, runs: (length: Int, stride: Int), c: UnsafeMutablePointer<Float>, ldc: Int,
                      residual: UnsafePointer<Float>?, _ epilogue: Int8Epilogue, staging: UnsafeMutablePointer<Float>,
                      extent: UnsafeMutablePointer<Float>, panel: UnsafeMutableRawPointer? = nil) {
    // A grid without junk columns is one run: C's rows follow one another, so no strip need
    // stop at a row's end.
    let whole = max(1, columns.upperBound)
    let runs = runs.length == runs.stride ? (length: whole, stride: whole) : runs
    var bounds = Bounds(UnsafePointer(extent))
    // The panel: steps rows of 16 columns, then their offsets.
    let packed = panel.map { panel in
        let offsets = (panel + 64 * steps).bindMemory(to: Int.self, capacity: steps)
        for i in 0..<steps { offsets[i] = 16 * i }
        return (b: panel.bindMemory(to: UInt32.self, capacity: 16 * steps), rows: UnsafePointer(offsets))
    }
    func strip<C: Int8Columns>(_: C.Type, at q: Int, _ observer: inout Bounds) {
        // A local copy, kept in registers across the stores to C (`finishRows`).
        var bounds = observer
        defer { observer = bounds }
        let x = q % runs.stride
        let direct = x + C.width <= runs.length && q + C.width <= columns.upperBound
        let start = q / runs.stride * runs.length + x
        let (ahead, source) = (b + q + 32, rows)
        var (b, rows) = (b + q, rows)
        if let packed {
            for i in 0..<steps { C(loading: b + rows[i]).write(to: packed.b + 16 * i) }
            (b, rows) = (UnsafePointer(packed.b), packed.rows)
        }
        var unseen = Unseen()
        // Each tile's share of B's rows ends where the next one's starts.
        let tiles = (m + 3) / 4
        var shared = 0
        for first in stride(from: 0, to: m, by: 4) {
            let count = min(4, m - first), end = (first / 4 + 1) * steps / tiles
            // Two strips on, a tile's share at a time (all at a strip's start stall the core): B's
            // rows into L1 and, for writing, the tile's lines of C, streams too many for the
            // hardware prefetcher.
            for i in shared..<end { prefetchL1(ahead + source[i]) }
            shared = end
            if direct {
                for r in first..<(first + count) { prefetchWrite(c + r * ldc + start + 32) }
                int8Tile(C.self, a: a + first * steps, steps: steps, b: b, rows: rows, first: first, count: count,
                         c: c + start, ldc: ldc, residual: residual.map { $0 + start }, epilogue, staging: staging + 64,
                         &bounds)
                continue
            }
            int8Tile(C.self, a: a + first * steps, steps: steps, b: b, rows: rows, first: first, count: count,
                     c: staging - first * C.width, ldc: C.width, residual: nil, epilogue, staging: staging + 64, &unseen)
            copyRuns(staging, width: C.width, rows: first..<(first + count),
                     columns: q..<min(q + C.width, columns.upperBound), runs: runs, to: c, ldc: ldc, residual: residual,
                     &bounds)
        }
    }
    // Strips follow C's runs, past the grid's junk columns: within a run each is finished
    // straight into C; only a run's last < 8 columns take a strip across into the next run.
    var q = columns.lowerBound
    while q < columns.upperBound {
        let x = q % runs.stride
        guard x < runs.length else {
            q += runs.stride - x
            continue
        }
        let rest = min(runs.length - x, columns.upperBound - q)
        if rest >= 16 || (rest < 8 && q + 16 <= columns.upperBound) {
            strip(Int8Columns16.self, at: q, &bounds)
            q += 16
        } else {
            strip(Int8Columns8.self, at: q, &bounds)
            q += 8
        }
    }
    UnsafeMutableRawPointer(extent).storeBytes(of: bounds.lo, as: __m256.self)
    UnsafeMutableRawPointer(extent + 8).storeBytes(of: bounds.hi, as: __m256.self)
}

/// The bytes `int8GEMM`'s panel takes.
package func int8PanelBytes(steps: Int) -> Int { steps * (64 + MemoryLayout<Int>.stride) }

/// Lane-wise bounds of the floats `int8GEMM` stores, kept in registers.
struct Bounds: StoreObserver {
    var lo: __m256, hi: __m256

    init(_ extent: UnsafePointer<Float>) {
        (lo, hi) = (UnsafeRawPointer(extent).loadUnaligned(as: __m256.self), UnsafeRawPointer(extent + 8).loadUnaligned(as: __m256.self))
    }

    /// x[i] + residual[i] for i < count into the bounds, as `copy` adds them (the last vector
    /// overlapping the one before).
    @inline(__always)
    mutating func widen(by x: UnsafePointer<Float>, plus residual: UnsafePointer<Float>?, count: Int) {
        @inline(__always) func value(_ i: Int) -> Vec8 { x.vector(i) + (residual?.vector(i) ?? Vec8()) }
        guard count >= 8 else {
            for i in 0..<count { add(Vec8(repeating: x[i] + (residual?[i] ?? 0))) }
            return
        }
        for i in stride(from: 0, to: count - 8, by: 8) { add(value(i)) }
        add(value(count - 8))
    }

    /// Lanes of an 8-float vector (the int8 epilogue's).
    @inline(__always)
    mutating func add<V: FloatVector>(_ v: V) {
        let x = unsafeBitCast(v, to: __m256.self)
        (lo, hi) = (lanesMin(lo, x), lanesMax(hi, x))
    }
}

/// A tile row's Int32 sums over `width` columns, held in registers.
protocol Int8Columns {
    static var width: Int { get }
    init()
    /// self += the products of `weights` (4 bytes broadcast) with `b`'s columns, 4 bytes each.
    mutating func add(_ weights: __m256i, times b: Self)
    init(loading p: UnsafePointer<UInt32>)
    /// The columns' bytes at `p` (32-byte aligned).
    func write(to p: UnsafeMutablePointer<UInt32>)
    /// Row `row`'s sums as floats with the bias, at `c`, each vector also to `seen`.
    func store<O: StoreObserver>(row: Int, at c: UnsafeMutablePointer<Float>, _ epilogue: Int8Epilogue, _ seen: inout O)
}

struct Int8Columns16: Int8Columns {
    static var width: Int { 16 }
    var v0 = __m256i(), v1 = __m256i()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<UInt32>) {
        v0 = UnsafeRawPointer(p).loadUnaligned(as: __m256i.self)
        v1 = UnsafeRawPointer(p + 8).loadUnaligned(as: __m256i.self)
    }

    @inline(__always)
    func write(to p: UnsafeMutablePointer<UInt32>) {
        UnsafeMutableRawPointer(p).storeBytes(of: v0, as: __m256i.self)
        UnsafeMutableRawPointer(p + 8).storeBytes(of: v1, as: __m256i.self)
    }

    @inline(__always)
    mutating func add(_ weights: __m256i, times b: Self) {
        v0 = dotAccumulate(v0, b.v0, weights)
        v1 = dotAccumulate(v1, b.v1, weights)
    }

    @inline(__always)
    func store<O: StoreObserver>(row: Int, at c: UnsafeMutablePointer<Float>, _ epilogue: Int8Epilogue, _ seen: inout O) {
        epilogue.store(v0, row: row, at: c, &seen)
        epilogue.store(v1, row: row, at: c + 8, &seen)
    }
}

struct Int8Columns8: Int8Columns {
    static var width: Int { 8 }
    var v0 = __m256i()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<UInt32>) { v0 = UnsafeRawPointer(p).loadUnaligned(as: __m256i.self) }

    @inline(__always)
    func write(to p: UnsafeMutablePointer<UInt32>) { UnsafeMutableRawPointer(p).storeBytes(of: v0, as: __m256i.self) }

    @inline(__always)
    mutating func add(_ weights: __m256i, times b: Self) { v0 = dotAccumulate(v0, b.v0, weights) }

    @inline(__always)
    func store<O: StoreObserver>(row: Int, at c: UnsafeMutablePointer<Float>, _ epilogue: Int8Epilogue, _ seen: inout O) {
        epilogue.store(v0, row: row, at: c, &seen)
    }
}

/// Rows `first ..< first + count` (count ≤ 4; a panel's padding rows are computed and dropped) of
/// C (and of the residual) from the panel at `a`, columns 0 ..< C.width from `b` + each step's
/// row offset. With an activation or a residual, the sums go to `staging` (64 floats, in L1) and
/// `Int8Epilogue.finish` takes them to C once a tile: per row, the activation's constants cost
/// more than the products of a short reduction. The values stored in C go to `seen`.
@inline(__always)
func int8Tile<C: Int8Columns, O: StoreObserver>(
    _: C.Type, a: UnsafePointer<UInt32>, steps: Int, b: UnsafePointer<UInt32>, rows: UnsafePointer<Int>, first: Int,
    count: Int, c: UnsafeMutablePointer<Float>, ldc: Int, residual: UnsafePointer<Float>?, _ epilogue: Int8Epilogue,
    staging: UnsafeMutablePointer<Float>, _ seen: inout O
) {
    var r0 = C(), r1 = C(), r2 = C(), r3 = C()
    let w = UnsafeRawPointer(a)
    for i in 0..<steps {
        let bv = C(loading: b + rows[i]), pa = w + 16 &* i
        r0.add(broadcastInt32(pa.load(as: Int32.self)), times: bv)
        r1.add(broadcastInt32(pa.load(fromByteOffset: 4, as: Int32.self)), times: bv)
        r2.add(broadcastInt32(pa.load(fromByteOffset: 8, as: Int32.self)), times: bv)
        r3.add(broadcastInt32(pa.load(fromByteOffset: 12, as: Int32.self)), times: bv)
    }
    /// The tile's rows at `out` (row r at out + r · ld).
    @inline(__always) func store<P: StoreObserver>(at out: UnsafeMutablePointer<Float>, ld: Int, _ seen: inout P) {
        r0.store(row: first, at: out + first * ld, epilogue, &seen)
        if count > 1 { r1.store(row: first + 1, at: out + (first + 1) * ld, epilogue, &seen) }
        if count > 2 { r2.store(row: first + 2, at: out + (first + 2) * ld, epilogue, &seen) }
        if count > 3 { r3.store(row: first + 3, at: out + (first + 3) * ld, epilogue, &seen) }
    }
    guard epilogue.activation != .none || residual != nil else { return store(at: c, ld: ldc, &seen) }
    var unseen = Unseen()
    store(at: staging - first * C.width, ld: C.width, &unseen)
    epilogue.finish(rows: first..<(first + count), sums: staging, ld: C.width, c: c, ldc: ldc, width: C.width,
                    residual: residual, &seen)
}

extension Reference {
    /// `int8GEMM`'s sums, one multiply-add at a time: C[r, j] = Σ over steps i and bytes q of
    /// A's weight (r, i, q) · B's byte q of column j of step i, before the epilogue.
    package static func int8GEMM(_ a: [UInt32], m: Int, steps: Int, b: [UInt32], rows: [Int], n: Int) -> [Int32] {
        var c = [Int32](repeating: 0, count: m * n)
        for r in 0..<m {
            for j in 0..<n {
                var sum: Int32 = 0
                for i in 0..<steps {
                    let w = a[(r / 4 * steps + i) * 4 + r % 4], x = b[rows[i] + j]
                    for q in 0..<4 {
                        sum += Int32(Int8(truncatingIfNeeded: w >> (8 * q))) * Int32(UInt8(truncatingIfNeeded: x >> (8 * q)))
                    }
                }
                c[r * n + j] = sum
            }
        }
        return c
    }
}

/// Convolution weights [Cout, Cin / groups, kH, kW], laid out once (at load) for the kernel that
/// uses them: depthwise weights as they are; the others as GEMM panels of 8 output channels,
/// [groups][⌈Cout/g / 8⌉][K = Cin/g · kH · kW][8], zero-padded past the last channel, so the
/// micro-kernel reads the 8 weights of one reduction step from one cache line.
public struct ConvWeights: Sendable {
    /// [Cout, Cin / groups, kH, kW].
    public let shape: [Int]
    public let groups: Int
    let values: [Float]

    public init(_ weight: Tensor, groups: Int) {
        precondition(weight.rank == 4 && groups > 0 && weight.shape[0] % groups == 0,
                     "ConvWeights: weight \(weight.shape) with \(groups) groups")
        shape = weight.shape
        self.groups = groups
        isDepthwise = shape[1] == 1 && groups == shape[0]
        if isDepthwise {
            values = weight.scalars
            return
        }
        let coutG = shape[0] / groups, k = shape[1] * shape[2] * shape[3], tiles = (coutG + 7) / 8
        var packed = [Float](repeating: 0, count: groups * tiles * k * 8)
        for g in 0..<groups {
            for o in 0..<coutG {
                let panel = (g * tiles + o / 8) * k * 8, row = (g * coutG + o) * k
                for i in 0..<k { packed[panel + i * 8 + o % 8] = weight.scalars[row + i] }
            }
        }
        values = packed
    }

    /// Scalars of the weight (padding excluded).
    public var count: Int { shape.reduce(1, *) }
    /// One filter per channel: the direct depthwise kernel, not a GEMM.
    let isDepthwise: Bool
    /// Cin/g · kH · kW: the GEMM's K.
    var reduction: Int { shape[1] * shape[2] * shape[3] }
    var panelsPerGroup: Int { (shape[0] / groups + 7) / 8 }
}

/// What the GEMM does to each sum before storing it: + bias of its row, activation, + residual
/// (same layout as the output), in that order, as separate passes would round it.
struct Epilogue {
    let bias: UnsafePointer<Float>
    let activation: Activation
    let residual: UnsafePointer<Float>?

    @inline(__always)
    func activate(_ y: Vec16) -> Vec16 {
        switch activation {
        case .none: y
        case .silu: silu(y)
        case .sigmoid: sigmoid(y)
        }
    }

    /// activation(sum + bias of `row`).
    @inline(__always)
    func apply(_ sum: Vec16, row: Int) -> Vec16 { activate(sum + bias[row]) }

    /// Finishes rows `rows` of `c` (leading dimension `ldc`), `width` floats (whole vectors)
    /// from `column`, holding sum + bias: the activation, then the residual. Kernels store
    /// their sums first and finish here, a tile at a time, in a function of its own: inlined
    /// into a GEMM's tile loop, exp stayed a call (the optimizer stops inlining into very large
    /// functions), and a call with 24 accumulators live spilled them all.
    @inline(never)
    func finish(rows: Range<Int>, ldc: Int, column: Int, width: Int, in c: UnsafeMutablePointer<Float>) {
        for row in rows {
            var i = row * ldc + column
            let end = i + width
            while i < end {
                var y = activate(c.vec16(i))
                if let residual { y += residual.vec16(i) }
                c.store(y, at: i)
                i += 16
            }
        }
    }
}

/// C[M, N] = epilogue(A · B) for A packed as one group's `ConvWeights` panels and B [K, N] read
/// where it lies, row i starting at `b + rows[i]` (no packing: a convolution's input, each
/// row of B one kernel tap's view of it, is an implicit im2col). C and the residual have
/// leading dimension `ldc`.
///
/// Tiles of 8 rows × 48 columns stay in 24 AVX-512 registers for the whole reduction; the
/// K × 48 strip of B is reused from cache by every row tile. On this machine's shapes this beat
/// OpenBLAS's sgemm plus a separate epilogue pass (see ARCHITECTURE.md).
func packedGEMM(_ a: UnsafePointer<Float>, m: Int, k: Int, b: UnsafePointer<Float>, rows: UnsafePointer<Int>, n: Int,
                c: UnsafeMutablePointer<Float>, ldc: Int, _ epilogue: Epilogue) {
    let tiles = (m + 7) / 8
    func strip<R: TileRow>(_: R.Type, at j: Int) {
        for t in 0..<tiles {
            tile(R.self, k: k, a: a + t * 8 * k, b: b + j, offsets: rows, rows: t * 8..<min(m, t * 8 + 8),
                 c: c, ldc: ldc, column: j, epilogue)
        }
    }
    let j = columnRuns(n, { strip(Row48.self, at: $0) }, { strip(Row16.self, at: $0) })
    guard j < n else { return }
    // The last n − j < 16 columns: through zero-padded copies of B and C, bias and activation
    // there, the residual on the way out.
    let rest = n - j
    withUnsafeTemporaryAllocation(of: Float.self, capacity: k * 16 + m * 16) { scratch in
        let pb = scratch.baseAddress!, pc = pb + k * 16
        for i in 0..<k {
            (pb + i * 16).initialize(repeating: 0, count: 16)
            (pb + i * 16).update(from: b + rows[i] + j, count: rest)
        }
        let padded = Epilogue(bias: epilogue.bias, activation: epilogue.activation, residual: nil)
        withUnsafeTemporaryAllocation(of: Int.self, capacity: k) { offsets in
            for i in 0..<k { offsets[i] = i * 16 }
            for t in 0..<tiles {
                tile(Row16.self, k: k, a: a + t * 8 * k, b: pb, offsets: offsets.baseAddress!,
                     rows: t * 8..<min(m, t * 8 + 8), c: pc, ldc: 16, column: 0, padded)
            }
        }
        for r in 0..<m {
            let out = c + r * ldc + j, sum = pc + r * 16
            if let residual = epilogue.residual {
                for i in 0..<rest { out[i] = sum[i] + residual[r * ldc + j + i] }
            } else {
                out.update(from: sum, count: rest)
            }
        }
    }
}

/// Calls `run48(j)` for the 48-column runs of 0..<n, then `run16(j)` for 16-column ones, and
/// returns where the last < 16 columns start.
@inline(__always)
func columnRuns(_ n: Int, _ run48: (Int) -> Void, _ run16: (Int) -> Void) -> Int {
    var j = 0
    while j + 48 <= n {
        run48(j)
        j += 48
    }
    while j + 16 <= n {
        run16(j)
        j += 16
    }
    return j
}

/// 16 · w adjacent floats of one row, held in registers.
protocol TileRow {
    /// Floats per row.
    static var width: Int { get }
    init()
    init(loading p: UnsafePointer<Float>)
    /// self += a · b, lane by lane (fused multiply-add).
    mutating func add(_ a: Float, times b: Self)
    /// Stores the row plus `bias`.
    func store(adding bias: Float, at offset: Int, into c: UnsafeMutablePointer<Float>)
}

struct Row48: TileRow {
    static var width: Int { 48 }
    var v0 = Vec16(), v1 = Vec16(), v2 = Vec16()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<Float>) { (v0, v1, v2) = (p.vec16(0), p.vec16(16), p.vec16(32)) }

    @inline(__always)
    mutating func add(_ a: Float, times b: Row48) {
        let s = Vec16(repeating: a)
        v0 = v0.addingProduct(s, b.v0)
        v1 = v1.addingProduct(s, b.v1)
        v2 = v2.addingProduct(s, b.v2)
    }

    @inline(__always)
    func store(adding bias: Float, at offset: Int, into c: UnsafeMutablePointer<Float>) {
        c.store(v0 + bias, at: offset)
        c.store(v1 + bias, at: offset + 16)
        c.store(v2 + bias, at: offset + 32)
    }
}

struct Row16: TileRow {
    static var width: Int { 16 }
    var v0 = Vec16()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<Float>) { v0 = p.vec16(0) }

    @inline(__always)
    mutating func add(_ a: Float, times b: Row16) { v0 = v0.addingProduct(Vec16(repeating: a), b.v0) }

    @inline(__always)
    func store(adding bias: Float, at offset: Int, into c: UnsafeMutablePointer<Float>) { c.store(v0 + bias, at: offset) }
}

/// Rows `rows` (at most 8; the panel's padding rows are computed and dropped) of C, columns
/// `column ..< column + width`, summed over k in order; row i of B starts at `b + offsets[i]`.
@inline(__always)
func tile<R: TileRow>(_: R.Type, k: Int, a: UnsafePointer<Float>, b: UnsafePointer<Float>, offsets: UnsafePointer<Int>,
                      rows: Range<Int>, c: UnsafeMutablePointer<Float>, ldc: Int, column: Int, _ epilogue: Epilogue) {
    var r0 = R(), r1 = R(), r2 = R(), r3 = R(), r4 = R(), r5 = R(), r6 = R(), r7 = R()
    var pa = a
    for i in 0..<k {
        let bv = R(loading: b + offsets[i])
        r0.add(pa[0], times: bv)
        r1.add(pa[1], times: bv)
        r2.add(pa[2], times: bv)
        r3.add(pa[3], times: bv)
        r4.add(pa[4], times: bv)
        r5.add(pa[5], times: bv)
        r6.add(pa[6], times: bv)
        r7.add(pa[7], times: bv)
        pa += 8
    }
    @inline(__always) func put(_ r: R, _ i: Int) {
        let row = rows.lowerBound + i
        if row < rows.upperBound { r.store(adding: epilogue.bias[row], at: row * ldc + column, into: c) }
    }
    put(r0, 0); put(r1, 1); put(r2, 2); put(r3, 3); put(r4, 4); put(r5, 5); put(r6, 6); put(r7, 7)
    if epilogue.activation != .none || epilogue.residual != nil {
        epilogue.finish(rows: rows, ldc: ldc, column: column, width: R.width, in: c)
    }
}

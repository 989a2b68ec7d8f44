import CTargetFeatures

/// What the GEMM does to each sum before storing it: + bias of its row, activation, + residual
/// (same layout as the output), in that order, as separate passes would round it.
package struct Epilogue {
    let bias: UnsafePointer<Float>
    let activation: Activation
    let residual: UnsafePointer<Float>?

    package init(bias: UnsafePointer<Float>, activation: Activation, residual: UnsafePointer<Float>?) {
        (self.bias, self.activation, self.residual) = (bias, activation, residual)
    }

    @inline(__always)
    func activate<V: FloatVector>(_ y: V) -> V {
        switch activation {
        case .none: y
        case .silu: silu(y)
        case .sigmoid: sigmoid(y)
        case .relu: relu(y)
        case .leakyReLU: leakyReLU(y)
        }
    }

    /// activation(sum + bias of `row`).
    @inline(__always)
    func apply(_ sum: Vec16, row: Int) -> Vec16 { activate(sum + bias[row]) }

    /// Writes rows `rows` of `c` (leading dimension `ldc`), `width` floats (a multiple of 8: in
    /// vectors of the target's width, 16 lanes with AVX-512 where `width` is a multiple of 16,
    /// else 8; the AVX2 tiles, tested on every build, are 24 and 8 wide) from `column`: activation(sum + bias), then
    /// + residual, from the sums + bias at `sums` (row `rows.lowerBound + i` at `sums + i · ld`;
    /// `c` itself, finishing in place, or a GEMM tile's staging buffer). In a function of its
    /// own: inlined into a GEMM's tile loop, exp stays a call (the optimizer stops inlining into
    /// very large functions), and a call with the accumulators live spills them all.
    @inline(never)
    func finish(rows: Range<Int>, sums: UnsafePointer<Float>, ld: Int, ldc: Int, column: Int, width: Int,
                in c: UnsafeMutablePointer<Float>) {
        let (out, add) = (c + column, residual.map { $0 + column })
        if wideVectors && width % 16 == 0 {
            finish(Vec16.self, rows: rows, sums: sums, ld: ld, c: out, ldc: ldc, width: width, residual: add)
        } else {
            finish(Vec8.self, rows: rows, sums: sums, ld: ld, c: out, ldc: ldc, width: width, residual: add)
        }
    }

    @inline(__always)
    private func finish<V: FloatVector>(_: V.Type, rows: Range<Int>, sums: UnsafePointer<Float>, ld: Int,
                                        c: UnsafeMutablePointer<Float>, ldc: Int, width: Int,
                                        residual: UnsafePointer<Float>?) {
        var unseen = Unseen()
        switch activation {
        case .none: finishRows(V.self, Identity.self, rows, sums, ld, c, ldc, width, residual, &unseen)
        case .silu: finishRows(V.self, SiLU.self, rows, sums, ld, c, ldc, width, residual, &unseen)
        case .sigmoid: finishRows(V.self, Sigmoid.self, rows, sums, ld, c, ldc, width, residual, &unseen)
        case .relu: finishRows(V.self, ReLU.self, rows, sums, ld, c, ldc, width, residual, &unseen)
        case .leakyReLU: finishRows(V.self, LeakyReLU.self, rows, sums, ld, c, ldc, width, residual, &unseen)
        }
    }
}

/// What sees the floats the GEMMs store, in registers (`Bounds`, the int8 GEMM's), or nothing:
/// each vector `finishRows` stores, and each piece `copyRuns` copies.
protocol StoreObserver {
    mutating func add<V: FloatVector>(_ v: V)
    /// x[i] + residual[i] for i < count, as `copy` stores them.
    mutating func widen(by x: UnsafePointer<Float>, plus residual: UnsafePointer<Float>?, count: Int)
}

struct Unseen: StoreObserver {
    @inline(__always) func add<V: FloatVector>(_ v: V) {}
    @inline(__always) func widen(by x: UnsafePointer<Float>, plus residual: UnsafePointer<Float>?, count: Int) {}
}

/// Rows `rows` of `c` (leading dimension `ldc`), `width` floats in vectors of `V`: F(sum), then
/// + the residual (`c`'s layout), from the sums at `sums` (row `rows.lowerBound + i` at
/// `sums + i · ld`). One loop per activation (a type: as a closure it could stay a call per
/// vector) and residual, in wrapping arithmetic: with the choices and the overflow checks
/// inside, the loop around SiLU has many more instructions. The epilogues of both GEMMs; each
/// vector stored is also given to `seen`, through a local copy: the inout itself stays in memory
/// across the stores to `c`, a load and a store per vector on the loop's critical path.
/// A function per activation, not inlined: in one function with all ten loops the optimizer
/// stopped inlining the 16-float loads, a call per vector whose lanes came back in four 128-bit
/// quarters, and SiLU ran in those quarters (1×1 convolutions 1.4–2 × slower on AVX-512).
@inline(never)
func finishRows<V: FloatVector, F: ActivationFunction, O: StoreObserver>(
    _: V.Type, _: F.Type, _ rows: Range<Int>, _ sums: UnsafePointer<Float>, _ ld: Int, _ c: UnsafeMutablePointer<Float>,
    _ ldc: Int, _ width: Int, _ residual: UnsafePointer<Float>?, _ observer: inout O
) {
    var seen = observer
    defer { observer = seen }
    for row in rows {
        let out = c + row &* ldc, from = sums + (row &- rows.lowerBound) &* ld
        var i = 0
        if let residual {
            let add = residual + row &* ldc
            while i < width {
                let v = F.apply(from.vector(i) as V) + add.vector(i)
                out.store(v, at: i)
                seen.add(v)
                i &+= V.scalarCount
            }
        } else {
            while i < width {
                let v = F.apply(from.vector(i) as V)
                out.store(v, at: i)
                seen.add(v)
                i &+= V.scalarCount
            }
        }
    }
}

/// C[M, N] = epilogue(A · B) for A packed as one group's `ConvWeights` panels and B [K, ·] read
/// where it lies, row i starting at `b + rows[i]` (no packing: a convolution's input, each
/// row of B one kernel tap's view of it, is an implicit im2col). C and the residual have
/// leading dimension `ldc`.
///
/// `runs`: C's column j is B's column j / length · stride + j % length, so a convolution whose
/// planes' rows are wider than its output's (`PhasePlanes.width` > Wo) writes its output rows
/// where they belong instead of through a cropped copy; nil: B's column j. The strips then
/// follow B's columns, junk ones included, so each reads B in one piece: a strip across two
/// runs of C's columns would read B in two, always through the panel.
/// B may be read up to `gemmReadSlack` floats past the last column a run uses. `scratch` holds
/// `gemmScratch(m:)` floats of the call's temporaries (one per concurrent call).
///
/// `inPlace`: the tiles read B's rows where they lie, not from a copied panel, wherever a
/// strip is whole, a panel's depth of reduction steps at a time. For products of few rows
/// (a convolution's ≤ 32 output channels), whose tiles reuse a panel only a few times, the copy
/// costs more than that reuse saves (also past a panel's depth); rows a multiple of 4 KB apart,
/// which fall into the same L1 sets, need the copy. Rows read in place are not prefetched: it
/// did not pay.
///
/// Register tiles stay in registers for the whole reduction, and the K-row strip of B under
/// them is reused from cache by every row tile. Their shape follows the vector registers the
/// build targets: 8 rows × 48 columns in 24 of AVX-512's 32 registers, 4 rows × 24 columns in 12
/// of AVX2's 16 (the 8 × 48 tile spills there). On the models' shapes this beats OpenBLAS's sgemm
/// plus a separate epilogue pass (see docs/PERFORMANCE.md).
///
/// `blocks` (`GEMMBlocks.forProduct`, for an A beyond L2): the product runs in blocks of A that
/// stay in L2 for a group of strips, the group's sums in `scratch` between them.
package func packedGEMM(_ a: UnsafePointer<Float>, m: Int, k: Int, b: UnsafePointer<Float>, rows: UnsafePointer<Int>,
                        n: Int, runs: (length: Int, stride: Int)? = nil, c: UnsafeMutablePointer<Float>, ldc: Int,
                        _ epilogue: Epilogue, scratch: UnsafeMutablePointer<Float>, inPlace: Bool = false,
                        blocks: GEMMBlocks? = nil, tiles: TileGeometry = .target) {
    let runs = runs ?? (n, n)
    switch tiles {
    case .avx512:
        packedGEMM(Row48.self, Row16.self, a, m: m, k: k, b: b, rows: rows, n: n, runs: runs, c: c, ldc: ldc, epilogue,
                   scratch: scratch, inPlace: inPlace, blocks: blocks)
    case .avx2:
        packedGEMM(Row24.self, Row8.self, a, m: m, k: k, b: b, rows: rows, n: n, runs: runs, c: c, ldc: ldc, epilogue,
                   scratch: scratch, inPlace: inPlace, blocks: blocks)
    }
}

/// Blocks for `packedGEMM` when A outgrows L2, where every strip would stream all of A: the
/// columns go in groups of `n`, and each group block by block, `m` rows × `k` reduction steps of
/// A staying in L2 while every strip of the group reads them, the group's sums kept in a grid
/// in the scratch between blocks.
package struct GEMMBlocks: Sendable {
    /// Reduction steps, rows (a multiple of 8, A's panels) and columns (a multiple of 48, the
    /// widest tile) of a block.
    package let k: Int, m: Int, n: Int

    package init(k: Int, m: Int, n: Int) {
        precondition(k > 0 && m > 0 && m % 8 == 0 && n > 0 && n % 48 == 0, "GEMMBlocks: k \(k), m \(m), n \(n)")
        (self.k, self.m, self.n) = (k, m, n)
    }

    /// The blocks for an M × K product whose A (4 · M · K bytes) is larger than
    /// `largestUnblocked`, nil for a smaller one: 256 rows × 170 steps of A, a third of the
    /// smallest L2 the targeted cores have, so it stays there beside B's panels and the grid's
    /// rows it meets; 480 columns (20 strips of 24, 10 of 48).
    package static func forProduct(m: Int, k: Int) -> GEMMBlocks? {
        4 * m * k > largestUnblocked ? GEMMBlocks(k: 170, m: 256, n: 480) : nil
    }

    static let largestUnblocked = 2 << 20
}

/// Weights (A) of this many bytes or more, which every strip reads whole, come from beyond L2:
/// each tile asks the next panel's lines into L2 as it runs, or each panel would start a stream
/// from memory. Smaller ones stay in cache, where the prefetches only cost.
let streamedWeightBytes = 1 << 20

/// Floats of `packedGEMM`'s temporaries for an M-row product: B's panel (at most
/// `panelFloats` and a tile row), a strip's rows of C (padded last columns, or a strip of runs),
/// then a tile's staging buffer (`tileFloats`); with `blocks`, the sums' grid (M rows of a
/// group's columns).
package func gemmScratch(m: Int, blocks: GEMMBlocks? = nil) -> Int {
    panelFloats + 2 * gemmReadSlack + 48 * m + tileFloats + m * (blocks?.n ?? 0)
}

/// Floats of the widest register tile (8 × 48).
let tileFloats = 8 * 48

/// The GEMM's register tiles: 8 × 48 (AVX-512) or 4 × 24 (AVX2). Either runs on any x86-64
/// build (at a fraction of the speed on the other), so tests check both on every machine.
package enum TileGeometry: CaseIterable, Sendable {
    case avx512, avx2

    /// The tiles that fit the registers this build targets.
    package static var target: TileGeometry { wideVectors ? .avx512 : .avx2 }
}

/// Floats past its last used column that `packedGEMM` may read of B's rows: the widest tile.
package let gemmReadSlack = 48

/// `packedGEMM` with tiles `Wide` over as many columns as they cover, then the rest on one
/// `Narrow` as wide as it, else on one tile padded with zeros (`Wide` past `Narrow`'s width); with
/// runs shorter than their stride, `Wide` over B's columns as they lie (one piece a strip), each
/// strip's rows of C scattered to their runs.
@inline(__always)
func packedGEMM<Wide: TileRow, Narrow: TileRow>(
    _: Wide.Type, _: Narrow.Type, _ a: UnsafePointer<Float>, m: Int, k: Int, b: UnsafePointer<Float>,
    rows: UnsafePointer<Int>, n: Int, runs: (length: Int, stride: Int), c: UnsafeMutablePointer<Float>, ldc: Int,
    _ epilogue: Epilogue, scratch: UnsafeMutablePointer<Float>, inPlace: Bool, blocks: GEMMBlocks?
) {
    // Reduction steps per pass: the strip's rows of B, copied together, stay in L1 for every
    // row tile (read where they lie, rows a multiple of 4 KB apart fell into the same cache set).
    let depth = max(1, panelFloats / Wide.width)
    let pb = scratch, staging = scratch + gemmScratch(m: m) - tileFloats
    // Blocks keep A in L2 already.
    let streamsA = blocks == nil && 4 * m * k >= streamedWeightBytes
    /// C's columns `column ..< column + R.width` from B's columns `j ..< j + count` (count ≤ R.width;
    /// zeros past them): reduction steps `block` (added to the sums C holds from earlier steps)
    /// of rows `rowBlock`.
    func strip<R: TileRow>(_: R.Type, from j: Int, count: Int, c: UnsafeMutablePointer<Float>, ldc: Int,
                           column: Int, _ epilogue: Epilogue, steps block: Range<Int> = 0..<k,
                           rows rowBlock: Range<Int> = 0..<m) {
        /// The lines of the tile's rows of C two strips on, for writing, once a strip (its first
        /// pass): a strip starts lines in every row of C, too many streams for the hardware
        /// prefetcher; asked a tile's rows at a time, since all at a strip's start stall the core.
        func prefetchC(tile first: Int, step: Int) {
            guard step == 0 else { return }
            for r in first..<min(rowBlock.upperBound, first + R.rows) {
                for o in stride(from: 0, to: R.width, by: 16) { prefetchWrite(c + r * ldc + column + 2 * R.width + o) }
            }
        }
        /// Floats from row `first`'s panel of A to the next one, 0 where A stays in cache or past
        /// the rows.
        func ahead(_ first: Int) -> Int { streamsA && (first / 8 + 1) * 8 < rowBlock.upperBound ? 8 * k : 0 }
        if inPlace && count == R.width {
            let source = b + j
            for step in stride(from: block.lowerBound, to: block.upperBound, by: depth) {
                let steps = step..<min(block.upperBound, step + depth)
                for first in stride(from: rowBlock.lowerBound, to: rowBlock.upperBound, by: R.rows) {
                    prefetchC(tile: first, step: step)
                    tile(R.self, steps: steps, of: k, a: a + first / 8 * 8 * k + first % 8, b: { source + rows[$0] },
                         rows: first..<min(rowBlock.upperBound, first + R.rows), c: c, ldc: ldc, column: column,
                         epilogue, staging: staging, ahead: ahead(first))
                }
            }
            return
        }
        for step in stride(from: block.lowerBound, to: block.upperBound, by: depth) {
            let steps = step..<min(block.upperBound, step + depth)
            for i in steps {
                let row = pb + (i - step) * R.width, from = b + rows[i] + j
                // The row two strips on, into L2 while this strip computes: B's rows are too
                // many streams for the hardware prefetcher.
                for o in stride(from: 0, to: R.width, by: 16) { prefetchL2(from + 2 * R.width + o) }
                if count == R.width {
                    R(loading: from).store(at: 0, into: row)
                } else {
                    row.initialize(repeating: 0, count: R.width)
                    row.update(from: from, count: count)
                }
            }
            for first in stride(from: rowBlock.lowerBound, to: rowBlock.upperBound, by: R.rows) {
                prefetchC(tile: first, step: step)
                tile(R.self, steps: steps, of: k, a: a + first / 8 * 8 * k + first % 8, b: pb,
                     rows: first..<min(rowBlock.upperBound, first + R.rows), c: c, ldc: ldc, column: column, epilogue,
                     staging: staging, ahead: ahead(first))
            }
        }
    }
    // The strips' rows of C when they do not go straight to C (M × Wide.width floats), finished
    // there but for the residual, which they take on their way to C.
    let rowsOfC = scratch + (depth + 1) * Wide.width
    let inner = Epilogue(bias: epilogue.bias, activation: epilogue.activation, residual: nil)
    // B's columns the strips read: with runs shorter than their stride, every run and the gaps
    // between them.
    let lines = (n + runs.length - 1) / runs.length, span = (lines - 1) * runs.stride + n - (lines - 1) * runs.length
    if let blocks {
        // Each group of B's columns (as they lie) block by block into the grid, finished there
        // on the last steps, then copied to C's runs with the residual.
        let grid = scratch + gemmScratch(m: m)
        for group in stride(from: 0, to: span, by: blocks.n) {
            let columns = group..<min(span, group + blocks.n)
            for kb in stride(from: 0, to: k, by: blocks.k) {
                for mb in stride(from: 0, to: m, by: blocks.m) {
                    for jb in stride(from: columns.lowerBound, to: columns.upperBound, by: Wide.width) {
                        strip(Wide.self, from: jb, count: min(Wide.width, columns.upperBound - jb), c: grid, ldc: blocks.n,
                              column: jb - group, inner, steps: kb..<min(k, kb + blocks.k), rows: mb..<min(m, mb + blocks.m))
                    }
                }
            }
            var unseen = Unseen()
            copyRuns(grid, width: blocks.n, rows: 0..<m, columns: columns, runs: runs, to: c, ldc: ldc,
                     residual: epilogue.residual, &unseen)
        }
        return
    }
    if runs.length < runs.stride {
        // Strips over B's columns as they lie, each a piece (in place wherever B's rows allow),
        // their C rows activated in `rowsOfC`, then copied to their runs with the residual: a
        // strip of C's columns across two runs read B in two pieces, always through the panel.
        for jb in stride(from: 0, to: span, by: Wide.width) {
            let x = jb % runs.stride
            if x + Wide.width <= runs.length {
                // Within one run: straight to C.
                strip(Wide.self, from: jb, count: Wide.width, c: c, ldc: ldc, column: jb / runs.stride * runs.length + x,
                      epilogue)
                continue
            }
            strip(Wide.self, from: jb, count: Wide.width, c: rowsOfC, ldc: Wide.width, column: 0, inner)
            var unseen = Unseen()
            copyRuns(rowsOfC, width: Wide.width, rows: 0..<m, columns: jb..<min(jb + Wide.width, span), runs: runs,
                     to: c, ldc: ldc, residual: epilogue.residual, &unseen)
        }
        return
    }
    var j = 0
    while j + Wide.width <= n {
        strip(Wide.self, from: j, count: Wide.width, c: c, ldc: ldc, column: j, epilogue)
        j += Wide.width
    }
    let rest = n - j
    if rest == Narrow.width {
        return strip(Narrow.self, from: j, count: rest, c: c, ldc: ldc, column: j, epilogue)
    }
    guard rest > 0 else { return }
    /// The last columns on one tile `S` padded with zeros, into a padded copy of C: bias and
    /// activation there, the residual on the way out.
    func last<S: TileRow>(_: S.Type) {
        strip(S.self, from: j, count: rest, c: rowsOfC, ldc: S.width, column: 0, inner)
        for r in 0..<m {
            copy(rowsOfC + r * S.width, rest, to: c + r * ldc + j, adding: epilogue.residual.map { $0 + r * ldc + j })
        }
    }
    // Wide past a narrow tile's width: a narrow tile loads a broadcast for each product, so its
    // columns cost about twice a wide tile's.
    if rest > Narrow.width { last(Wide.self) } else { last(Narrow.self) }
}

/// Rows `rows` of a strip staged at `staged` (`width` floats a row, grid column `columns.lowerBound`
/// first) copied to C's columns, plus the residual (C's layout): grid column g is C's column
/// g / stride · length + g % stride, and grid columns with g % stride ≥ length are dropped. Each
/// piece's floats also go to `seen`.
@inline(__always)
func copyRuns<O: StoreObserver>(_ staged: UnsafePointer<Float>, width: Int, rows: Range<Int>, columns: Range<Int>,
                                runs: (length: Int, stride: Int), to c: UnsafeMutablePointer<Float>, ldc: Int,
                                residual: UnsafePointer<Float>?, _ seen: inout O) {
    var g = columns.lowerBound
    while g < columns.upperBound {
        let x = g % runs.stride
        guard x < runs.length else {
            g += runs.stride - x
            continue
        }
        let count = min(runs.length - x, columns.upperBound - g), column = g / runs.stride * runs.length + x
        for r in rows {
            let from = staged + (r - rows.lowerBound) * width + g - columns.lowerBound
            let add = residual.map { $0 + r * ldc + column }
            copy(from, count, to: c + r * ldc + column, adding: add)
            seen.widen(by: from, plus: add, count: count)
        }
        g += count
    }
}

/// y[i] = x[i] (+ residual[i]) for i < count: whole vectors, then the vector ending at count
/// (its first lanes written again, the same values); 8 to 15 floats as two such 8-float
/// vectors, fewer one by one.
@inline(__always)
func copy(_ x: UnsafePointer<Float>, _ count: Int, to y: UnsafeMutablePointer<Float>,
          adding residual: UnsafePointer<Float>?) {
    @inline(__always) func put(_ i: Int) { y.store(x.vec16(i) + (residual?.vec16(i) ?? Vec16()), at: i) }
    @inline(__always) func put8(_ i: Int) { y.store(x.vector(i) + (residual?.vector(i) ?? Vec8()), at: i) }
    if count < 8 {
        for i in 0..<count { y[i] = x[i] + (residual?[i] ?? 0) }
        return
    }
    if count < 16 {
        put8(0)
        put8(count - 8)
        return
    }
    var i = 0
    while i + 16 <= count {
        put(i)
        i += 16
    }
    if i < count { put(count - 16) }
}

/// Floats of B one pass of a GEMM strip reads: two thirds of an L1 of 48 KB or more, else half of
/// a 32 KB one, so the strip stays in L1 while every row tile reads it (see docs/PERFORMANCE.md).
let panelFloats = largeL1 ? 8192 : 4096

/// Whether a core's L1 data cache holds 48 KB or more, where the GEMM's larger panels pay
/// (`panelFloats`).
let largeL1 = CPU.l1DataBytes >= 48 << 10

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

/// `width` adjacent floats of one row, held in registers, and how many such rows a GEMM tile
/// holds.
protocol TileRow: Sendable {
    /// Floats per row.
    static var width: Int { get }
    /// Rows per GEMM tile: 8 (a whole weight panel) or 4 (half of one).
    static var rows: Int { get }
    init()
    init(loading p: UnsafePointer<Float>)
    /// self += a · b, lane by lane (fused multiply-add).
    mutating func add(_ a: Float, times b: Self)
    /// Every lane plus `bias`.
    func adding(_ bias: Float) -> Self
    func store(at offset: Int, into c: UnsafeMutablePointer<Float>)
}

/// Three vectors of one row: 48 floats in 8-row tiles (24 of AVX-512's 32 registers) or 24 in
/// 4-row tiles (12 of AVX2's 16).
struct Row3<V: FloatVector>: TileRow {
    static var width: Int { 3 * V.scalarCount }
    static var rows: Int { V.scalarCount == 16 ? 8 : 4 }
    var v0 = V(), v1 = V(), v2 = V()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<Float>) { (v0, v1, v2) = (p.vector(0), p.vector(V.scalarCount), p.vector(2 * V.scalarCount)) }

    @inline(__always)
    mutating func add(_ a: Float, times b: Self) {
        let s = V(repeating: a)
        v0 = v0.addingProduct(s, b.v0)
        v1 = v1.addingProduct(s, b.v1)
        v2 = v2.addingProduct(s, b.v2)
    }

    @inline(__always)
    func adding(_ bias: Float) -> Self {
        var r = self
        (r.v0, r.v1, r.v2) = (v0 + bias, v1 + bias, v2 + bias)
        return r
    }

    @inline(__always)
    func store(at offset: Int, into c: UnsafeMutablePointer<Float>) {
        c.store(v0, at: offset)
        c.store(v1, at: offset + V.scalarCount)
        c.store(v2, at: offset + 2 * V.scalarCount)
    }
}

/// One vector of one row, in 8-row tiles: the columns past the last wide tile.
struct Row1<V: FloatVector>: TileRow {
    static var width: Int { V.scalarCount }
    static var rows: Int { 8 }
    var v0 = V()
    init() {}

    @inline(__always)
    init(loading p: UnsafePointer<Float>) { v0 = p.vector(0) }

    @inline(__always)
    mutating func add(_ a: Float, times b: Self) { v0 = v0.addingProduct(V(repeating: a), b.v0) }

    @inline(__always)
    func adding(_ bias: Float) -> Self {
        var r = self
        r.v0 += bias
        return r
    }

    @inline(__always)
    func store(at offset: Int, into c: UnsafeMutablePointer<Float>) { c.store(v0, at: offset) }
}

typealias Row48 = Row3<Vec16>
typealias Row24 = Row3<Vec8>
typealias Row16 = Row1<Vec16>
typealias Row8 = Row1<Vec8>

/// Rows 0 ..< rows of C (ldc floats a row) (+)= A · B over reduction steps `steps`, C's columns
/// 0 ..< count in groups of 4 on `columnTile`s of up to three of A's panels: for strips of at
/// most 8 columns, where a row tile would load a broadcast per product. B's step i at
/// b + (i − steps.lowerBound) · ldb, each row ⌈count / 4⌉ · 4 floats; A as `tile` reads it.
@inline(__always)
package func columnTiles(rows: Int, count: Int, steps: Range<Int>, k: Int, a: UnsafePointer<Float>,
                         b: UnsafePointer<Float>, ldb: Int, c: UnsafeMutablePointer<Float>, ldc: Int) {
    for first in stride(from: 0, to: rows, by: 24) {
        let left = rows - first
        for column in stride(from: 0, to: count, by: 4) {
            let (pa, pb, pc) = (a + first * k, b + column, c + first * ldc + column)
            if left > 16 {
                columnTile(ThreePanels.self, rows: left, steps: steps, k: k, a: pa, b: pb, ldb: ldb, c: pc, ldc: ldc)
            } else if left > 8 {
                columnTile(TwoPanels.self, rows: left, steps: steps, k: k, a: pa, b: pb, ldb: ldb, c: pc, ldc: ldc)
            } else {
                columnTile(OnePanel.self, rows: left, steps: steps, k: k, a: pa, b: pb, ldb: ldb, c: pc, ldc: ldc)
            }
        }
    }
}

/// The number of A's 8-row panels a `columnTile` holds.
protocol PanelGroup { static var count: Int { get } }
enum OnePanel: PanelGroup { static var count: Int { 1 } }
enum TwoPanels: PanelGroup { static var count: Int { 2 } }
enum ThreePanels: PanelGroup { static var count: Int { 3 } }

/// Rows 0 ..< min(rows, 8 · P.count) of C, columns 0 ..< 4: the sums over `steps` (added to C's
/// where `steps` starts past 0) with A's rows as vector lanes and a broadcast of B per column,
/// 12 products a step on 7 loads. Panel q of A at a + 8 q k.
@inline(__always)
func columnTile<P: PanelGroup>(_: P.Type, rows: Int, steps: Range<Int>, k: Int, a: UnsafePointer<Float>,
                               b: UnsafePointer<Float>, ldb: Int, c: UnsafeMutablePointer<Float>, ldc: Int) {
    @inline(__always) func start(_ q: Int, _ column: Int) -> Vec8 {
        var v = Vec8()
        guard steps.lowerBound > 0, q < P.count else { return v }
        for lane in 0..<min(8, rows - 8 * q) { v[lane] = c[(8 * q + lane) * ldc + column] }
        return v
    }
    var (s00, s01, s02, s03) = (start(0, 0), start(0, 1), start(0, 2), start(0, 3))
    var (s10, s11, s12, s13) = (start(1, 0), start(1, 1), start(1, 2), start(1, 3))
    var (s20, s21, s22, s23) = (start(2, 0), start(2, 1), start(2, 2), start(2, 3))
    var pa = a + 8 * steps.lowerBound, pb = b
    for _ in steps {
        let a0: Vec8 = pa.vector(0)
        let a1: Vec8 = P.count > 1 ? (pa + 8 * k).vector(0) : Vec8()
        let a2: Vec8 = P.count > 2 ? (pa + 16 * k).vector(0) : Vec8()
        @inline(__always) func column(_ j: Int, _ x0: inout Vec8, _ x1: inout Vec8, _ x2: inout Vec8) {
            let s = Vec8(repeating: pb[j])
            x0 = x0.addingProduct(a0, s)
            if P.count > 1 { x1 = x1.addingProduct(a1, s) }
            if P.count > 2 { x2 = x2.addingProduct(a2, s) }
        }
        column(0, &s00, &s10, &s20)
        column(1, &s01, &s11, &s21)
        column(2, &s02, &s12, &s22)
        column(3, &s03, &s13, &s23)
        pa += 8
        pb += ldb
    }
    @inline(__always) func put(_ q: Int, _ column: Int, _ v: Vec8) {
        guard q < P.count else { return }
        for lane in 0..<min(8, rows - 8 * q) { c[(8 * q + lane) * ldc + column] = v[lane] }
    }
    put(0, 0, s00); put(0, 1, s01); put(0, 2, s02); put(0, 3, s03)
    put(1, 0, s10); put(1, 1, s11); put(1, 2, s12); put(1, 3, s13)
    put(2, 0, s20); put(2, 1, s21); put(2, 2, s22); put(2, 3, s23)
}

/// Rows `rows` (at most `R.rows`; a panel's padding rows are computed and dropped) of C, columns
/// `column ..< column + R.width`: reduction steps `steps` of `k` added in order to what earlier
/// steps stored there, and at the last step the epilogue. The weights of row `rows.lowerBound` at
/// step i are `a[8 i]`; B's rows for `steps` lie one after another from `b`. `staging`
/// (`tileFloats`) holds the sums an activation or residual finishes into C; it may be nil for a
/// plain epilogue. `ahead`: floats from A's panel to the next one (0: none), whose lines the tile
/// asks into L2 a step at a time (`streamedWeightBytes`). Transparent (always inlined, as
/// swift-numerics marks its small functions): `@inline(__always)` is a hint, and once the staging
/// grew the function the optimizer made it a call a tile.
@_transparent
func tile<R: TileRow>(_: R.Type, steps: Range<Int>, of k: Int, a: UnsafePointer<Float>, b: UnsafePointer<Float>,
                      rows: Range<Int>, c: UnsafeMutablePointer<Float>, ldc: Int,
                      column: Int, _ epilogue: Epilogue, staging: UnsafeMutablePointer<Float>?, ahead: Int = 0) {
    tile(R.self, steps: steps, of: k, a: a, b: { b + ($0 &- steps.lowerBound) &* R.width }, rows: rows, c: c, ldc: ldc,
         column: column, epilogue, staging: staging, ahead: ahead)
}

/// `tile` with step i's B row at `b(i)`.
@_transparent
func tile<R: TileRow>(_: R.Type, steps: Range<Int>, of k: Int, a: UnsafePointer<Float>, b: (Int) -> UnsafePointer<Float>,
                      rows: Range<Int>, c: UnsafeMutablePointer<Float>, ldc: Int,
                      column: Int, _ epilogue: Epilogue, staging: UnsafeMutablePointer<Float>?, ahead: Int = 0) {
    @inline(__always) func start(_ i: Int) -> R {
        let row = rows.lowerBound + i
        return steps.lowerBound == 0 || row >= rows.upperBound ? R() : R(loading: c + row * ldc + column)
    }
    var r0 = start(0), r1 = start(1), r2 = start(2), r3 = start(3)
    var r4 = R(), r5 = R(), r6 = R(), r7 = R()
    if R.rows == 8 { (r4, r5, r6, r7) = (start(4), start(5), start(6), start(7)) }
    var pa = a + 8 * steps.lowerBound
    for i in steps {
        if ahead > 0 { prefetchL2(pa + ahead) }
        let bv = R(loading: b(i))
        r0.add(pa[0], times: bv)
        r1.add(pa[1], times: bv)
        r2.add(pa[2], times: bv)
        r3.add(pa[3], times: bv)
        if R.rows == 8 {
            r4.add(pa[4], times: bv)
            r5.add(pa[5], times: bv)
            r6.add(pa[6], times: bv)
            r7.add(pa[7], times: bv)
        }
        pa += 8
    }
    let last = steps.upperBound == k
    // With an activation or residual, the sums go to the staging buffer (in L1) and reach C once,
    // finished: stored to C and read back, they would wait on C's lines wherever those miss the
    // cache.
    let staged = last && (epilogue.activation != .none || epilogue.residual != nil)
    let out = staged ? staging! : c + column, ld = staged ? R.width : ldc
    @inline(__always) func put(_ r: R, _ i: Int) {
        let row = rows.lowerBound + i
        if row < rows.upperBound {
            (last ? r.adding(epilogue.bias[row]) : r).store(at: (staged ? i : row) * ld, into: out)
        }
    }
    put(r0, 0); put(r1, 1); put(r2, 2); put(r3, 3)
    if R.rows == 8 { put(r4, 4); put(r5, 5); put(r6, 6); put(r7, 7) }
    if staged {
        epilogue.finish(rows: rows, sums: out, ld: R.width, ldc: ldc, column: column, width: R.width, in: c)
    }
}

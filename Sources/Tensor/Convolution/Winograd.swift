import CTargetFeatures
/// 3×3 stride-1 convolutions by Winograd's F(2×2, 3×3): each 2×2 output tile comes from its 4×4
/// input patch d as Aᵀ [U ⊙ (Bᵀ d B)] A, with U = G g Gᵀ the filter transformed at load. The
/// 16 points of the transformed tile are 16 independent products over the input channels, each a
/// GEMM (M = Cout, K = Cin, N = tiles): 16 multiply-adds per tile and channel pair instead of 36.
/// The transforms' coefficients are 0, ±1 and ±½, so they add a few roundings, not error growth.
enum Winograd {
    /// G, the filter transform (4 × 3).
    static let g: [[Double]] = [[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]]

    /// U_ξ = (G g Gᵀ)_ξ of weight [Cout, Cin, 3, 3] for the 16 points ξ = 4i + j, each laid out as
    /// GEMM panels [⌈Cout/8⌉][Cin][8] (computed in Double).
    static func panels(_ weight: Tensor) -> [Float] {
        let (cout, cin) = (weight.shape[0], weight.shape[1]), pack = (cout + 7) / 8 * cin * 8
        var packed = [Float](repeating: 0, count: 16 * pack)
        for o in 0..<cout {
            for c in 0..<cin {
                let f = (0..<9).map { Double(weight.scalars[(o * cin + c) * 9 + $0]) }
                for i in 0..<4 {
                    for j in 0..<4 {
                        var u = 0.0
                        for a in 0..<3 {
                            for b in 0..<3 { u += g[i][a] * f[3 * a + b] * g[j][b] }
                        }
                        packed[(4 * i + j) * pack + o / 8 * cin * 8 + c * 8 + o % 8] = Float(u)
                    }
                }
            }
        }
        return packed
    }

    /// The input patches as a 4×4 stride-2 "convolution" over the input padded by 1: tile (ty, tx)
    /// reads patch tap (ky, kx) from the phase planes at row ty + ky / 2, column tx + kx / 2.
    static let patches = Conv2DParameters(kernel: 4, stride: 2, padding: 1)
}

/// y [Cout, H, W] = epilogue(conv(x [Cin, H, W], 3×3, stride 1, padding 1)) from `Winograd.panels`
/// weights, on the GEMM's register tiles `tiles`. Each thread takes blocks of tile rows and lays out their input patches
/// (`PhasePlanes`). The GEMMs' columns are the block's tiles, rows of them padded to a multiple of 8;
/// for each strip of columns as wide as the register tile, every point ξ's B panel (V_ξ = Bᵀ d B
/// at ξ, four patch taps per channel) is built straight from the planes, its GEMM stores
/// M_ξ [Cout][strip], and the strip is transformed back into the output: nothing the size of the
/// 16 transformed copies of a block is ever written.
package func winogradConv2d(_ x: UnsafePointer<Float>, channels cin: Int, h: Int, w: Int, weight: UnsafePointer<Float>,
                            outputs cout: Int, _ y: UnsafeMutablePointer<Float>, bias: UnsafePointer<Float>,
                            activation: Activation, residual: UnsafePointer<Float>?, threads: Int,
                            scratch: Scratch, tiles: TileGeometry = .target) {
    switch tiles {
    case .avx512:
        winogradConv2d(Row48.self, Row16.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                       activation: activation, residual: residual, threads: threads, scratch: scratch)
    case .avx2:
        winogradConv2d(Row24.self, Row8.self, x, channels: cin, h: h, w: w, weight: weight, outputs: cout, y, bias: bias,
                       activation: activation, residual: residual, threads: threads, scratch: scratch)
    }
}

@inline(__always)
private func winogradConv2d<R: TileRow, Narrow: TileRow>(_: R.Type, _: Narrow.Type, _ x: UnsafePointer<Float>,
                                                         channels cin: Int, h: Int, w: Int,
                                        weight: UnsafePointer<Float>, outputs cout: Int, _ y: UnsafeMutablePointer<Float>,
                                        bias: UnsafePointer<Float>, activation: Activation,
                                        residual: UnsafePointer<Float>?, threads: Int, scratch: Scratch) {
    let tilesY = (h + 1) / 2
    let pack = (cout + 7) / 8 * cin * 8, depth = min(cin, winogradPanelFloats / R.width)
    let grid = PhasePlanes(channels: cin, h: h, w: w, ho: tilesY, threads: threads, Winograd.patches)
    // The last strip of a block reads up to a strip of junk tiles past the planes.
    let planesCount = grid.count + R.width
    // The strip outputs' last 8 tiles are read past their end (`transformOutputs`).
    let perThread = planesCount + 16 * ((depth + cout) * R.width + 2 * winogradSkew) + 8
    // A block a part, for threads to claim as they come free.
    let parts = Parallel.ranges(grid.blockCount, parts: grid.blockCount), workers = min(threads, parts.count)
    // Each thread's planes, panels and strip outputs, then a zero bias; the patch taps.
    let (buffers, taps) = scratch.take(floats: workers * perThread + cout, ints: cin * 16)
    let zeros = buffers + workers * perThread
    zeros.initialize(repeating: 0, count: cout)
    grid.rowOffsets(channels: cin, Winograd.patches, into: taps)
    Parallel.forEach(parts.count, threads: workers, WinogradParts<R, Narrow>(
        x: Address(x), weight: Address(weight), y: Address(y), bias: Address(bias), residual: residual.map { Address($0) },
        zeros: Address(zeros), taps: Address(taps), scratch: Address(buffers), perThread: perThread, planesCount: planesCount,
        parts: parts, grid: grid, activation: activation, cin: cin, cout: cout, h: h, w: w, depth: depth, pack: pack))
}

/// `winogradConv2d`'s parts: blocks of tile rows, run with their thread's scratch, in strips of `R`
/// tiles, the last of a block in up to two `Narrow` ones when those cover it (20×20 maps: 110 grid
/// columns in two strips of 48 and one of 16, not three of 48; 40×40 on 2 threads: blocks of 210
/// in four of 48 and two of 16), its last ≤ 8 in an 8-wide one on column tiles (20×20 on 2 threads:
/// blocks of 55 in 48 + 8, not 48 + 16).
private struct WinogradParts<R: TileRow, Narrow: TileRow>: ParallelWork {
    let x: Address<Float>, weight: Address<Float>, y: Address<Float>, bias: Address<Float>, residual: Address<Float>?
    let zeros: Address<Float>, taps: Address<Int>, scratch: Address<Float>
    let perThread: Int, planesCount: Int
    let parts: Partition
    let grid: PhasePlanes
    let activation: Activation
    let cin: Int, cout: Int, h: Int, w: Int, depth: Int, pack: Int

    func run(part: Int, thread t: Int) {
        let tilesY = (h + 1) / 2
        let planes = scratch.pointer + t * perThread
        for block in parts[part] {
            let first = block * grid.blockRows, tileRows = min(grid.blockRows, tilesY - first)
            grid.fill(planes, from: x.pointer, outputRows: first, Winograd.patches)
            let end = tileRows * grid.width
            var column = 0
            while end - column > 2 * Narrow.width {
                strip(R.self, column: column, block: (first, tileRows), thread: t)
                column += R.width
            }
            while end - column > Row8.width {
                strip(Narrow.self, column: column, block: (first, tileRows), thread: t)
                column += Narrow.width
            }
            if column < end { strip(Row8.self, column: column, block: (first, tileRows), thread: t) }
        }
    }

    /// The tiles `column ..< column + S.width` of the block whose first tile row is `block.first`.
    @inline(__always)
    private func strip<S: TileRow>(_: S.Type, column: Int, block: (first: Int, rows: Int), thread t: Int) {
        // The strip outputs follow the panels as laid out for R (`depth` steps), which hold those of S.
        let planes = scratch.pointer + t * perThread, panels = planes + planesCount
        let m = panels + 16 * (depth * R.width + winogradSkew)
        let plain = Epilogue(bias: zeros.pointer, activation: .none, residual: nil)
        // Reduction steps a pass of S: the panels hold the same floats whatever the strip's width.
        let stepsPerPass = min(cin, winogradPanelFloats / S.width), pointStride = stepsPerPass * S.width + winogradSkew
        // The points' panels follow one another, 8 · cin floats apart (`streamedWeightBytes`).
        let streams = 4 * 16 * pack >= streamedWeightBytes
        for step in stride(from: 0, to: cin, by: stepsPerPass) {
            let steps = step..<min(cin, step + stepsPerPass)
            // In vectors of the target's width where the tile's is a multiple of it.
            for c in steps {
                if wideVectors && S.width % 16 == 0 {
                    transformInput(Vec16.self, planes, taps: taps.pointer + 16 * c, into: panels + (c - step) * S.width,
                                   point: pointStride, columns: column..<(column + S.width))
                } else {
                    transformInput(Vec8.self, planes, taps: taps.pointer + 16 * c, into: panels + (c - step) * S.width,
                                   point: pointStride, columns: column..<(column + S.width))
                }
            }
            for point in 0..<16 {
                let a = weight.pointer + point * pack
                let (b, c) = (panels + point * pointStride, m + point * (cout * S.width + winogradSkew))
                if S.width == Row8.width {
                    columnTiles(rows: cout, count: S.width, steps: steps, k: cin, a: a, b: b, ldb: S.width, c: c,
                                ldc: S.width)
                    continue
                }
                for row in stride(from: 0, to: cout, by: S.rows) {
                    tile(S.self, steps: steps, of: cin, a: a + row / 8 * 8 * cin + row % 8, b: b,
                         rows: row..<min(cout, row + S.rows), c: c, ldc: S.width, column: 0, plain, staging: nil,
                         ahead: streams && (point < 15 || (row / 8 + 1) * 8 < cout) ? 8 * cin : 0)
                }
            }
        }
        transformOutputs(m, width: S.width, tiles: column,
                         grid: (width: grid.width, columns: (w + 1) / 2, rows: block.rows), row: 2 * block.first)
    }

    /// The strip of `width` tiles from `tiles` back into the output, every channel, in a function
    /// per activation, so that it is inlined there: with closures, SiLU stayed a call per vector
    /// or the whole activation did.
    private func transformOutputs(_ m: UnsafePointer<Float>, width: Int, tiles: Int,
                                  grid: (width: Int, columns: Int, rows: Int), row: Int) {
        switch activation {
        case .none: transformOutputs(Identity.self, m, width: width, tiles: tiles, grid: grid, row: row)
        case .silu: transformOutputs(SiLU.self, m, width: width, tiles: tiles, grid: grid, row: row)
        case .sigmoid: transformOutputs(Sigmoid.self, m, width: width, tiles: tiles, grid: grid, row: row)
        case .relu: transformOutputs(ReLU.self, m, width: width, tiles: tiles, grid: grid, row: row)
        case .leakyReLU: transformOutputs(LeakyReLU.self, m, width: width, tiles: tiles, grid: grid, row: row)
        }
    }

    @inline(never)
    private func transformOutputs<F: ActivationFunction>(_: F.Type, _ m: UnsafePointer<Float>, width: Int, tiles: Int,
                                                         grid: (width: Int, columns: Int, rows: Int), row: Int) {
        let residual = residual.map { UnsafePointer($0.pointer) }
        var q = 0
        while q < width {
            // The strip's tiles from q in one grid row, divided out once for every channel (a
            // division by a number known only at run time), in groups of 8, the last one ending
            // at the row's last tile over some already done: groups across grid rows would go tile
            // by tile. A channel's groups one after the other: each line of its sums comes from L2
            // once, not once a group.
            let (r, tx) = (tiles + q).quotientAndRemainder(dividingBy: grid.width)
            guard r < grid.rows else { return }
            let run = min(grid.width - tx, width - q), count = max(0, min(grid.columns - tx, run))
            for o in 0..<cout {
                var k = 0
                while k < count {
                    let first = count >= 8 ? min(k, count - 8) : k
                    transformOutput(F.self, m + o * width + q + first, point: cout * width + winogradSkew,
                                    tile: (r, tx + first), count: min(8, count - first), grid: grid, into: y.pointer,
                                    row: row, h: h, w: w, channel: o, bias: bias.pointer[o], residual: residual)
                    k = first + 8
                }
            }
            q += run
        }
    }
}

/// An activation as a type, for functions specialized per activation (closures left SiLU a call
/// in the larger ones).
protocol ActivationFunction {
    static func apply<V: FloatVector>(_ v: V) -> V
}

enum Identity: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { v }
}

enum SiLU: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { silu(v) }
}

enum Sigmoid: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { sigmoid(v) }
}

enum ReLU: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { relu(v) }
}

enum LeakyReLU: ActivationFunction {
    @inline(__always) static func apply<V: FloatVector>(_ v: V) -> V { leakyReLU(v) }
}

/// Floats of one point's B panel per pass: 16 of them are 96 KB, in L2 while their GEMMs read
/// them: 64 reduction steps of 24-column strips or 32 of 48-column ones.
let winogradPanelFloats = 1536

/// Floats between one point's B panel or sums and the next past their size: a tile's 16 points
/// are then 16 lines in different L1 sets, not in one (sums of 64 channels × 48 tiles are 12 KB,
/// a multiple of 4 KB) or two (panels of 1536 floats). Single convolutions 0.96–0.98 on 1 thread.
let winogradSkew = 16

/// Row c of the 16 points' B panels: (Bᵀ d B)_ξ of the tiles `columns` (tile t reads patch tap k
/// at `planes + taps[k] + t`), point ξ's at `panels + ξ · point`.
@inline(__always)
private func transformInput<V: FloatVector>(_: V.Type, _ planes: UnsafePointer<Float>, taps: UnsafePointer<Int>,
                                            into panels: UnsafeMutablePointer<Float>, point: Int, columns: Range<Int>) {
    for q in stride(from: 0, to: columns.count, by: V.scalarCount) {
        let base = planes + columns.lowerBound + q
        @inline(__always) func d(_ tap: Int) -> V { base.vector(taps[tap]) }
        // Bᵀ = [1 0 −1 0; 0 1 1 0; 0 −1 1 0; 0 1 0 −1] over the patch's rows (column x of Bᵀ d)…
        @inline(__always) func rows(_ x: Int) -> (V, V, V, V) {
            let (d0, d1, d2, d3) = (d(x), d(4 + x), d(8 + x), d(12 + x))
            return (d0 - d2, d1 + d2, d2 - d1, d1 - d3)
        }
        let (c0, c1, c2, c3) = (rows(0), rows(1), rows(2), rows(3))
        // …then over its columns: row i of Bᵀ d B.
        @inline(__always) func store(_ i: Int, _ t0: V, _ t1: V, _ t2: V, _ t3: V) {
            panels.store(t0 - t2, at: (4 * i) * point + q)
            panels.store(t1 + t2, at: (4 * i + 1) * point + q)
            panels.store(t2 - t1, at: (4 * i + 2) * point + q)
            panels.store(t1 - t3, at: (4 * i + 3) * point + q)
        }
        store(0, c0.0, c1.0, c2.0, c3.0)
        store(1, c0.1, c1.1, c2.1, c3.1)
        store(2, c0.2, c1.2, c2.2, c3.2)
        store(3, c0.3, c1.3, c2.3, c3.3)
    }
}

/// Output rows of channel `channel` from the `count` ≤ 8 tiles from grid row `tile.row`, column
/// `tile.column` (all in that row and inside its columns) of a block whose first tile row is
/// output row `row`: M's 16 points at `m + ξ · point` (8 tiles' worth read) transformed back
/// (Aᵀ = [1 1 1 0; 0 1 −1 −1]), + bias, the activation F, + residual.
@inline(__always)
private func transformOutput<F: ActivationFunction>(_: F.Type, _ m: UnsafePointer<Float>, point: Int,
                                                    tile: (row: Int, column: Int), count: Int,
                                                    grid: (width: Int, columns: Int, rows: Int),
                                                    into y: UnsafeMutablePointer<Float>, row: Int, h: Int, w: Int,
                                                    channel: Int, bias: Float, residual: UnsafePointer<Float>?) {
    let (r, tx) = tile
    @inline(__always) func p(_ i: Int, _ j: Int) -> Vec8 { m.vector((4 * i + j) * point) }
    // Aᵀ over M's rows: rows 0 and 1 of Aᵀ M, column j.
    @inline(__always) func column(_ j: Int) -> (Vec8, Vec8) {
        let (m0, m1, m2, m3) = (p(0, j), p(1, j), p(2, j), p(3, j))
        return (m0 + m1 + m2, m1 - m2 - m3)
    }
    let (c0, c1, c2, c3) = (column(0), column(1), column(2), column(3))
    for i in 0..<2 {
        let (s0, s1, s2, s3) = i == 0 ? (c0.0, c1.0, c2.0, c3.0) : (c0.1, c1.1, c2.1, c3.1)
        let (even, odd) = (s0 + s1 + s2 + bias, s1 - s2 - s3 + bias)
        let oy = row + 2 * r + i
        guard oy < h else { return }
        if count == 8 && 2 * tx + 16 <= w {
            let offset = (channel * h + oy) * w + 2 * tx
            // Interleaved by one permute (as zero-extended 64-bit lanes, the conversion stayed a
            // call a vector), then activated in 16 lanes where those are registers.
            var values = Vec16()
            if wideVectors {
                (values.evenHalf, values.oddHalf) = (even, odd)
                values = F.apply(values)
            } else {
                (values.evenHalf, values.oddHalf) = (F.apply(even), F.apply(odd))
            }
            if let residual { values += residual.vec16(offset) }
            y.store(values, at: offset)
            continue
        }
        // Fewer tiles, or the output's right edge: tile by tile.
        let (left, right) = (F.apply(even), F.apply(odd))
        for k in 0..<count {
            let xk = tx + k, at = (channel * h + oy) * w + 2 * xk
            y[at] = left[k] + (residual?[at] ?? 0)
            if 2 * xk + 1 < w { y[at + 1] = right[k] + (residual?[at + 1] ?? 0) }
        }
    }
}

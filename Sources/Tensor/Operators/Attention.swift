import CTargetFeatures
/// Multi-head self-attention over N positions, the core of Ultralytics' `Attention`: per head,
/// with q, k: [keyDim, N] and v: [headDim, N] the head's rows of `qkv`,
/// out[d][j] = Σ_i v[d][i] · p[i][j], where p[·][j] = softmax over keys i of scale · q[·][j] · k[·][i]
/// (Ultralytics: `v @ softmax((qᵀ @ k) * scale, dim=-1)ᵀ`).
/// With `areas` > 1 (YOLO12's `AAttn`), the positions split into that many consecutive runs of
/// N / areas and each query attends only to the keys of its own run.
///
/// - qkv: [heads, 2 · keyDim + headDim, N]. Returns [heads, headDim, N].
///
/// Both products run on `packedGEMM` with the scores kept transposed (keys × queries), so the
/// second product reads them as they lie. Every thread takes whole query columns, `tileWidth` at
/// a time, through all three steps: scores, exp down each column, then the weighted sum of v,
/// whose columns are divided by their softmax sums last (headDim rows, not N, to scale). The
/// tile's scores (N × tileWidth) stay in L2 between the steps.
public func attention(_ qkv: Tensor, keyDim: Int, headDim: Int, scale: Float, areas: Int = 1) -> Tensor {
    precondition(qkv.rank == 3 && keyDim > 0 && headDim > 0 && qkv.shape[1] == 2 * keyDim + headDim
                 && areas > 0 && qkv.shape[2] % areas == 0,
                 "attention: qkv \(qkv.shape) with keyDim \(keyDim), headDim \(headDim), \(areas) areas")
    let (heads, n) = (qkv.shape[0], qkv.shape[2])
    return Tensor(shape: [heads, headDim, n]) { out in
        qkv.scalars.withUnsafeBufferPointer {
            attention($0.baseAddress!, heads: heads, keyDim: keyDim, headDim: headDim, positions: n, areas: areas,
                      scale: scale, into: out.baseAddress!, scratch: Scratch())
        }
    }
}

/// `attention` on buffers: qkv [heads, 2 · keyDim + headDim, positions] → out [heads, headDim, positions].
/// Every row is `positions` long; an area reads and writes its run of `positions / areas` columns.
package func attention(_ qkv: UnsafePointer<Float>, heads: Int, keyDim: Int, headDim: Int, positions: Int, areas: Int = 1,
                       scale: Float, into out: UnsafeMutablePointer<Float>, scratch: Scratch) {
    precondition(areas > 0 && positions % areas == 0, "attention: \(positions) positions in \(areas) areas")
    // n: the positions attending to each other; ld: the rows' length.
    let (n, ld) = (positions / areas, positions)
    let rowsPerHead = 2 * keyDim + headDim
    let keyPanels = (n + 7) / 8 * keyDim * 8, valuePanels = (headDim + 7) / 8 * n * 8
    let parts = Parallel.ranges(n, parts: Parallel.width, align: 48)
    // kᵀ and v as GEMM panels of 8 rows (keys, value channels), zero-padded; a zero bias; each
    // thread's scores tile [keys, tileWidth] (with the GEMM's read slack), GEMM temporaries and
    // column sums; B's row offsets for q and for a scores tile.
    let gemm = gemmScratch(m: max(n, headDim)), tile = n * attentionTileWidth + gemmReadSlack
    let perThread = tile + gemm + attentionTileWidth
    let (floats, rows) = scratch.take(floats: keyPanels + valuePanels + max(n, headDim) + parts.count * perThread,
                                      ints: keyDim + n)
    let panels = floats, zeros = floats + keyPanels + valuePanels, threads = zeros + max(n, headDim)
    zeros.initialize(repeating: 0, count: max(n, headDim))
    for d in 0..<keyDim { rows[d] = d * ld }
    for i in 0..<n { rows[keyDim + i] = i * attentionTileWidth }
    let (pa, za, ra, ta) = (Address(panels), Address(zeros), Address(rows), Address(threads))
    for block in 0..<(heads * areas) {
        let (h, area) = block.quotientAndRemainder(dividingBy: areas)
        let q = qkv + h * rowsPerHead * ld + area * n, k = q + keyDim * ld, v = k + keyDim * ld
        // Only the panels holding padding rows are zeroed, and a key panel's row, 8 adjacent values
        // of a row of k, is copied a vector at a time: this part runs on one thread.
        let keysWhole = n / 8 * keyDim * 8, valuesWhole = headDim / 8 * n * 8
        (panels + keysWhole).initialize(repeating: 0, count: keyPanels - keysWhole)
        (panels + keyPanels + valuesWhole).initialize(repeating: 0, count: valuePanels - valuesWhole)
        for i in stride(from: 0, to: n / 8 * 8, by: 8) {
            for d in 0..<keyDim { panels.store(k.vector(d &* ld &+ i) as Vec8, at: (i &* keyDim &+ d &* 8)) }
        }
        for i in (n / 8 * 8)..<n {
            for d in 0..<keyDim { panels[((i / 8) * keyDim + d) * 8 + i % 8] = k[d * ld + i] }
        }
        for d in 0..<headDim {
            let row = v + d &* ld, to = panels + keyPanels + (d / 8) &* n &* 8 + d % 8
            for i in 0..<n { to[i &* 8] = row[i] }
        }
        Parallel.forEach(parts.count, AttentionColumns(
            panels: pa, out: Address(out + h * headDim * ld + area * n), zeros: za, rows: ra, threads: ta,
            q: Address(q), parts: parts, keyDim: keyDim, headDim: headDim, n: n, ld: ld, keyPanels: keyPanels, gemm: gemm,
            perThread: perThread, scale: scale))
    }
}

/// Query columns a thread takes through `attention`'s three steps at a time: a multiple of the
/// GEMM's register tiles (48 columns for AVX-512, 24 for AVX2) whose scores (N × 96 floats,
/// 150 KB at N = 400) stay in L2.
let attentionTileWidth = 96

/// `attention`'s part t of one head's area: query columns through scores, exp and the weighted
/// sum of v, `attentionTileWidth` at a time in thread t's scores tile; q's and out's rows are
/// `ld` long.
private struct AttentionColumns: ParallelWork {
    let panels: Address<Float>, out: Address<Float>, zeros: Address<Float>
    let rows: Address<Int>, threads: Address<Float>, q: Address<Float>
    let parts: Partition
    let keyDim: Int, headDim: Int, n: Int, ld: Int, keyPanels: Int, gemm: Int, perThread: Int
    let scale: Float

    func run(part t: Int, thread _: Int) {
        let none = Epilogue(bias: zeros.pointer, activation: .none, residual: nil)
        let s = threads.pointer + t * perThread, temporaries = s + n * attentionTileWidth + gemmReadSlack
        let reciprocals = temporaries + gemm
        let cols = parts[t]
        for first in stride(from: cols.lowerBound, to: cols.upperBound, by: attentionTileWidth) {
            let width = min(attentionTileWidth, cols.upperBound - first), o = out.pointer + first
            packedGEMM(panels.pointer, m: n, k: keyDim, b: q.pointer + first, rows: rows.pointer,
                       n: width, c: s, ldc: attentionTileWidth, none, scratch: temporaries)
            softmaxColumns(s, rows: n, stride: attentionTileWidth, count: width, scale: scale, reciprocals: reciprocals)
            packedGEMM(panels.pointer + keyPanels, m: headDim, k: n, b: s, rows: rows.pointer + keyDim, n: width,
                       c: o, ldc: ld, none, scratch: temporaries)
            for d in 0..<headDim {
                let row = o + d &* ld
                for j in 0..<width { row[j] *= reciprocals[j] }
            }
        }
    }
}

extension Reference {
    /// Through `Reference.matmul` and `Reference.softmax`, as Ultralytics writes it; areas one
    /// after the other.
    public static func attention(_ qkv: Tensor, keyDim: Int, headDim: Int, scale: Float, areas: Int = 1) -> Tensor {
        let (heads, rowsPerHead, positions) = (qkv.shape[0], qkv.shape[1], qkv.shape[2])
        guard areas == 1 else {
            let n = positions / areas
            /// Columns `c` of every row of `t` ([heads, rows, positions]).
            func columns(_ t: Tensor, _ c: Range<Int>) -> Tensor {
                Tensor(shape: [t.shape[0], t.shape[1], c.count],
                       scalars: (0..<(t.shape[0] * t.shape[1])).flatMap { r in t.scalars[(r * positions + c.lowerBound)..<(r * positions + c.upperBound)] })
            }
            let parts = (0..<areas).map { attention(columns(qkv, ($0 * n)..<(($0 + 1) * n)), keyDim: keyDim, headDim: headDim, scale: scale) }
            return Tensor(shape: [heads, headDim, positions], scalars: (0..<(heads * headDim)).flatMap { r in
                parts.flatMap { $0.scalars[(r * n)..<((r + 1) * n)] }
            })
        }
        let n = positions
        /// Rows `r` of every head: [heads, r.count, N].
        func rows(_ r: Range<Int>) -> Tensor {
            Tensor(shape: [heads, r.count, n], scalars: (0..<heads).flatMap { h in
                qkv.scalars[((h * rowsPerHead + r.lowerBound) * n)..<((h * rowsPerHead + r.upperBound) * n)]
            })
        }
        let scores = softmax(matmul(rows(0..<keyDim), rows(keyDim..<(2 * keyDim)), transposeA: true, alpha: scale))
        return matmul(rows((2 * keyDim)..<rowsPerHead), scores, transposeB: true)
    }
}

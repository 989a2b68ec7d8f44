import CTargetFeatures
/// Multi-head self-attention over N positions, the core of Ultralytics' `Attention`: per head,
/// with q, k: [keyDim, N] and v: [headDim, N] the head's rows of `qkv`,
/// out[d][j] = Σ_i v[d][i] · p[i][j], where p[·][j] = softmax over keys i of scale · q[·][j] · k[·][i]
/// (Ultralytics: `v @ softmax((qᵀ @ k) * scale, dim=-1)ᵀ`).
///
/// - qkv: [heads, 2 · keyDim + headDim, N]. Returns [heads, headDim, N].
///
/// Both products run on `packedGEMM` with the scores kept transposed (keys × queries), so the
/// second product reads them as they lie and every thread takes whole query columns through
/// all three steps: scores, softmax down each column, then the weighted sum of v.
public func attention(_ qkv: Tensor, keyDim: Int, headDim: Int, scale: Float) -> Tensor {
    precondition(qkv.rank == 3 && keyDim > 0 && headDim > 0 && qkv.shape[1] == 2 * keyDim + headDim,
                 "attention: qkv \(qkv.shape) with keyDim \(keyDim), headDim \(headDim)")
    let (heads, n) = (qkv.shape[0], qkv.shape[2])
    return Tensor(shape: [heads, headDim, n]) { out in
        qkv.scalars.withUnsafeBufferPointer {
            attention($0.baseAddress!, heads: heads, keyDim: keyDim, headDim: headDim, positions: n, scale: scale,
                      into: out.baseAddress!, scratch: Scratch())
        }
    }
}

/// `attention` on buffers: qkv [heads, 2 · keyDim + headDim, positions] → out [heads, headDim, positions].
package func attention(_ qkv: UnsafePointer<Float>, heads: Int, keyDim: Int, headDim: Int, positions n: Int, scale: Float,
                       into out: UnsafeMutablePointer<Float>, scratch: Scratch) {
    let rowsPerHead = 2 * keyDim + headDim
    let keyPanels = (n + 7) / 8 * keyDim * 8, valuePanels = (headDim + 7) / 8 * n * 8
    let parts = Parallel.ranges(n, parts: Parallel.width, align: 48)
    // kᵀ and v as GEMM panels of 8 rows (keys, value channels), zero-padded; the scores
    // [keys, queries]; a zero bias; each thread's GEMM temporaries; B's row offsets for q and
    // for the scores.
    let gemm = gemmScratch(m: max(n, headDim))
    let (floats, rows) = scratch.take(floats: keyPanels + valuePanels + n * n + max(n, headDim) + parts.count * gemm,
                                      ints: keyDim + n)
    let panels = floats, scores = floats + keyPanels + valuePanels, zeros = scores + n * n, temporaries = zeros + max(n, headDim)
    zeros.initialize(repeating: 0, count: max(n, headDim))
    for d in 0..<keyDim { rows[d] = d * n }
    for i in 0..<n { rows[keyDim + i] = i * n }
    let (pa, sa, za, ra, ta) = (Address(panels), Address(scores), Address(zeros), Address(rows), Address(temporaries))
    for h in 0..<heads {
        let q = qkv + h * rowsPerHead * n, k = q + keyDim * n, v = k + keyDim * n
        // Only the panels holding padding rows are zeroed, and a key panel's row, 8 adjacent values
        // of a row of k, is copied a vector at a time: this part runs on one thread.
        let keysWhole = n / 8 * keyDim * 8, valuesWhole = headDim / 8 * n * 8
        (panels + keysWhole).initialize(repeating: 0, count: keyPanels - keysWhole)
        (panels + keyPanels + valuesWhole).initialize(repeating: 0, count: valuePanels - valuesWhole)
        for i in stride(from: 0, to: n / 8 * 8, by: 8) {
            for d in 0..<keyDim { panels.store(k.vector(d &* n &+ i) as Vec8, at: (i &* keyDim &+ d &* 8)) }
        }
        for i in (n / 8 * 8)..<n {
            for d in 0..<keyDim { panels[((i / 8) * keyDim + d) * 8 + i % 8] = k[d * n + i] }
        }
        for d in 0..<headDim {
            let row = v + d &* n, to = panels + keyPanels + (d / 8) &* n &* 8 + d % 8
            for i in 0..<n { to[i &* 8] = row[i] }
        }
        Parallel.forEach(parts.count, AttentionColumns(
            panels: pa, scores: sa, out: Address(out + h * headDim * n), zeros: za, rows: ra, temporaries: ta, q: Address(q),
            parts: parts, keyDim: keyDim, headDim: headDim, n: n, keyPanels: keyPanels, gemm: gemm, scale: scale))
    }
}

/// `attention`'s part t of one head: query columns through scores, softmax and the weighted
/// sum of v, with thread t's GEMM temporaries.
private struct AttentionColumns: ParallelWork {
    let panels: Address<Float>, scores: Address<Float>, out: Address<Float>, zeros: Address<Float>
    let rows: Address<Int>, temporaries: Address<Float>, q: Address<Float>
    let parts: Partition
    let keyDim: Int, headDim: Int, n: Int, keyPanels: Int, gemm: Int
    let scale: Float

    func run(part t: Int, thread _: Int) {
        let cols = parts[t], s = scores.pointer + cols.lowerBound
        let none = Epilogue(bias: zeros.pointer, activation: .none, residual: nil)
        packedGEMM(panels.pointer, m: n, k: keyDim, b: q.pointer + cols.lowerBound, rows: rows.pointer,
                   n: cols.count, c: s, ldc: n, none, scratch: temporaries.pointer + t * gemm)
        softmaxColumns(s, rows: n, stride: n, count: cols.count, scale: scale)
        packedGEMM(panels.pointer + keyPanels, m: headDim, k: n, b: s, rows: rows.pointer + keyDim, n: cols.count,
                   c: out.pointer + cols.lowerBound, ldc: n, none, scratch: temporaries.pointer + t * gemm)
    }
}

extension Reference {
    /// Through `Reference.matmul` and `Reference.softmax`, as Ultralytics writes it.
    public static func attention(_ qkv: Tensor, keyDim: Int, headDim: Int, scale: Float) -> Tensor {
        let (heads, rowsPerHead, n) = (qkv.shape[0], qkv.shape[1], qkv.shape[2])
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

/// Batched matrix product over the leading axes (no broadcasting).
/// a: [..., M, K] (or [..., K, M] when `transposeA`), b: [..., K, N] (or [..., N, K] when
/// `transposeB`) → [..., M, N], scaled by `alpha`, on OpenBLAS (`BLAS.sgemm`). The segmentation
/// masks use it (YOLOCore's `processMasks`: coefficients · prototypes).
public func matmul(_ a: Tensor, _ b: Tensor, transposeA: Bool = false, transposeB: Bool = false,
                   alpha: Float = 1) -> Tensor {
    precondition(a.rank >= 2 && a.rank == b.rank && a.shape.dropLast(2) == b.shape.dropLast(2),
                 "matmul: shapes \(a.shape) and \(b.shape)")
    let (m, k) = transposeA ? (a.shape[a.rank - 1], a.shape[a.rank - 2]) : (a.shape[a.rank - 2], a.shape[a.rank - 1])
    let (kb, n) = transposeB ? (b.shape[b.rank - 1], b.shape[b.rank - 2]) : (b.shape[b.rank - 2], b.shape[b.rank - 1])
    precondition(k == kb, "matmul: inner dimensions \(k) and \(kb) differ (\(a.shape) · \(b.shape))")
    let batch = a.shape.dropLast(2).reduce(1, *)
    var y = Tensor(zeros: Array(a.shape.dropLast(2)) + [m, n])
    a.scalars.withUnsafeBufferPointer { ab in
        b.scalars.withUnsafeBufferPointer { bb in
            y.scalars.withUnsafeMutableBufferPointer { yb in
                for i in 0..<batch {
                    BLAS.sgemm(transA: transposeA, transB: transposeB, m: m, n: n, k: k, alpha: alpha,
                               a: ab.baseAddress! + i * m * k, lda: transposeA ? m : k,
                               b: bb.baseAddress! + i * k * n, ldb: transposeB ? k : n,
                               c: yb.baseAddress! + i * m * n, ldc: n)
                }
            }
        }
    }
    return y
}

extension Reference {
    public static func matmul(_ a: Tensor, _ b: Tensor, transposeA: Bool = false, transposeB: Bool = false,
                              alpha: Float = 1) -> Tensor {
        let r = a.rank
        let (m, k) = transposeA ? (a.shape[r - 1], a.shape[r - 2]) : (a.shape[r - 2], a.shape[r - 1])
        let n = transposeB ? b.shape[r - 2] : b.shape[r - 1]
        let batch = a.shape.dropLast(2).reduce(1, *)
        var y = Tensor(zeros: Array(a.shape.dropLast(2)) + [m, n])
        for i in 0..<batch {
            for row in 0..<m {
                for col in 0..<n {
                    var acc = 0.0
                    for t in 0..<k {
                        let av = a.scalars[i * m * k + (transposeA ? t * m + row : row * k + t)]
                        let bv = b.scalars[i * k * n + (transposeB ? col * k + t : t * n + col)]
                        acc += Double(av) * Double(bv)
                    }
                    y.scalars[i * m * n + row * n + col] = Float(acc * Double(alpha))
                }
            }
        }
        return y
    }
}

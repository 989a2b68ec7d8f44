/// Axis permutation: result dim i is input dim `permutation[i]`, as `torch.permute`.
///
/// Walks the output in order with an odometer over the input strides; when only the last
/// two axes swap it transposes 32×32 tiles so both sides stay in cache.
public func permuted(_ x: Tensor, _ permutation: [Int]) -> Tensor {
    precondition(permutation.sorted() == Array(0..<x.rank), "permuted: \(permutation) for rank \(x.rank)")
    let shape = permutation.map { x.shape[$0] }
    let inStrides = x.strides, strides = permutation.map { inStrides[$0] }
    var y = Tensor(zeros: shape)
    guard y.count > 0 else { return y }
    let r = x.rank
    x.scalars.withUnsafeBufferPointer { xb in
        y.scalars.withUnsafeMutableBufferPointer { yb in
            let src = xb.baseAddress!, dst = yb.baseAddress!
            if r >= 2 && Array(permutation.dropLast(2)) == Array(0..<(r - 2)) && permutation[r - 2] == r - 1 {
                let rows = x.shape[r - 2], cols = x.shape[r - 1], tile = 32
                for b in 0..<(x.count / (rows * cols)) {
                    let s = src + b * rows * cols, d = dst + b * rows * cols
                    for r0 in stride(from: 0, to: rows, by: tile) {
                        for c0 in stride(from: 0, to: cols, by: tile) {
                            for i in r0..<min(rows, r0 + tile) {
                                for j in c0..<min(cols, c0 + tile) { d[j * rows + i] = s[i * cols + j] }
                            }
                        }
                    }
                }
                return
            }
            var index = [Int](repeating: 0, count: r)
            var offset = 0
            for flat in 0..<yb.count {
                dst[flat] = src[offset]
                var d = r - 1
                while d >= 0 {
                    index[d] += 1
                    offset += strides[d]
                    if index[d] < shape[d] { break }
                    offset -= strides[d] * shape[d]
                    index[d] = 0
                    d -= 1
                }
            }
        }
    }
    return y
}

extension Reference {
    public static func permuted(_ x: Tensor, _ permutation: [Int]) -> Tensor {
        let shape = permutation.map { x.shape[$0] }
        var y = Tensor(zeros: shape)
        for flat in 0..<y.count {
            let outIndex = multiIndex(flat, shape)
            var inIndex = [Int](repeating: 0, count: x.rank)
            for (i, p) in permutation.enumerated() { inIndex[p] = outIndex[i] }
            y.scalars[flat] = x.scalars[flatIndex(inIndex, x.shape)]
        }
        return y
    }
}

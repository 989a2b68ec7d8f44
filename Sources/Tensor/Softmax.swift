import CTargetFeatures
import Foundation

/// Softmax along `axis` (the last by default): y = exp(x − max) / Σ exp(x − max).
/// Along the last axis row by row; along another, a vector of columns at a time (`softmaxColumns`).
public func softmax(_ x: Tensor, axis: Int = -1) -> Tensor {
    let axis = axis < 0 ? x.rank + axis : axis
    precondition(axis >= 0 && axis < x.rank && x.shape[axis] > 0, "softmax: axis \(axis) of shape \(x.shape)")
    let len = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *), outer = x.count / (len * inner)
    var y = x
    y.scalars.withUnsafeMutableBufferPointer { softmax($0.baseAddress!, outer: outer, length: len, inner: inner) }
    return y
}

/// In place over x [outer, length, inner]: softmax along the middle axis.
package func softmax(_ x: UnsafeMutablePointer<Float>, outer: Int, length len: Int, inner: Int) {
    let threads = outer * len * inner >= 1 << 14 ? Parallel.width : 1
    let parts = inner == 1 ? Parallel.ranges(outer, parts: threads) : Parallel.ranges(inner, parts: threads, align: 16)
    Parallel.forEach(parts.count, SoftmaxParts(x: Address(x), parts: parts, outer: outer, length: len, inner: inner))
}

/// `softmax`'s part: a range of rows (along the last axis) or of the inner columns.
private struct SoftmaxParts: ParallelWork {
    let x: Address<Float>
    let parts: Partition
    let outer: Int, length: Int, inner: Int

    func run(part: Int, thread _: Int) {
        if inner == 1 {
            for r in parts[part] { softmaxRow(x.pointer + r * length, count: length) }
        } else {
            for o in 0..<outer {
                softmaxColumns(x.pointer + o * length * inner + parts[part].lowerBound, rows: length, stride: inner,
                               count: parts[part].count, scale: 1)
            }
        }
    }
}

/// In-place softmax of one contiguous row.
func softmaxRow(_ row: UnsafeMutablePointer<Float>, count: Int) {
    var m = Vec16(repeating: -.infinity)
    var i = 0
    while i + 16 <= count {
        m = m.maximum(row.vec16(i))
        i += 16
    }
    var rowMax = m.max()
    while i < count {
        rowMax = max(rowMax, row[i])
        i += 1
    }
    if wideVectors {
        normalize(Vec16.self, row, count: count, max: rowMax)
    } else {
        normalize(Vec8.self, row, count: count, max: rowMax)
    }
}

/// row[i] = exp(row[i] − max) / Σ exp(row[j] − max), in vectors of `V`.
@inline(__always)
private func normalize<V: FloatVector>(_: V.Type, _ row: UnsafeMutablePointer<Float>, count: Int, max: Float) {
    let shift = V(repeating: max)
    mapVectors(UnsafePointer(row), row, count) { (v: V) in exp(v - shift) }
    var sum: Float = 0
    for j in 0..<count { sum += row[j] }
    let scale = V(repeating: 1 / sum)
    mapVectors(UnsafePointer(row), row, count) { (v: V) in v * scale }
}

extension Reference {
    public static func softmax(_ x: Tensor, axis: Int = -1) -> Tensor {
        let axis = axis < 0 ? x.rank + axis : axis
        let len = x.shape[axis], inner = x.shape[(axis + 1)...].reduce(1, *)
        var y = x
        for o in 0..<(x.count / (len * inner)) {
            for i in 0..<inner {
                let at = (0..<len).map { o * len * inner + $0 * inner + i }
                let values = at.map { Double(x.scalars[$0]) }
                let m = values.max()!
                let e = values.map { Foundation.exp($0 - m) }
                let s = e.reduce(0, +)
                for (j, index) in at.enumerated() { y.scalars[index] = Float(e[j] / s) }
            }
        }
        return y
    }
}

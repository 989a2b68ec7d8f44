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

/// In place, for each of `count` columns of a [rows, stride] matrix: x ← softmax(scale · x)
/// down the column, a vector of the target's width of columns at a time, with `softmaxRow`'s
/// order of operations (max, then exp(x − max) summed in row order, then times 1 / sum).
/// With `reciprocals`, the columns keep exp(x − max) and reciprocals[j] gets column j's 1 / sum,
/// for a caller that scales a smaller product instead. `scale` > 0, so max(scale · x) is
/// scale · max(x), rounded alike.
func softmaxColumns(_ p: UnsafeMutablePointer<Float>, rows: Int, stride: Int, count: Int, scale: Float,
                    reciprocals: UnsafeMutablePointer<Float>? = nil) {
    precondition(scale > 0, "softmaxColumns: scale \(scale)")
    if wideVectors {
        softmaxColumns(Vec16.self, p, rows: rows, stride: stride, count: count, scale: scale, reciprocals: reciprocals)
    } else {
        softmaxColumns(Vec8.self, p, rows: rows, stride: stride, count: count, scale: scale, reciprocals: reciprocals)
    }
}

@inline(__always)
private func softmaxColumns<V: FloatVector>(_: V.Type, _ p: UnsafeMutablePointer<Float>, rows: Int, stride: Int, count: Int,
                                            scale: Float, reciprocals: UnsafeMutablePointer<Float>?) {
    let width = V.scalarCount
    var j = 0
    while j < count {
        // The last columns go through padded vectors.
        let lanes = min(width, count - j)
        @inline(__always) func load(_ i: Int) -> V {
            if lanes == width { return p.vector(i * stride + j) }
            var v = V()
            for l in 0..<lanes { v[l] = p[i * stride + j + l] }
            return v
        }
        @inline(__always) func store(_ v: V, _ i: Int) {
            if lanes == width { return p.store(v, at: i * stride + j) }
            for l in 0..<lanes { p[i * stride + j + l] = v[l] }
        }
        var m = V(repeating: -.infinity)
        for i in 0..<rows { m = m.maximum(load(i)) }
        m *= scale
        var sum = V()
        for i in 0..<rows {
            let e = exp(load(i) * scale - m)
            sum += e
            store(e, i)
        }
        let r = 1 / sum
        if let reciprocals {
            for l in 0..<lanes { reciprocals[j + l] = r[l] }
        } else {
            for i in 0..<rows { store(load(i) * r, i) }
        }
        j += width
    }
}

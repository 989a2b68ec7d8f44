import Foundation

/// Softmax over the last axis: y = exp(x − max) / Σ exp(x − max), row by row.
public func softmax(_ x: Tensor) -> Tensor {
    precondition(x.rank >= 1 && x.shape.last! > 0, "softmax: shape \(x.shape)")
    let len = x.shape.last!
    var y = x
    y.scalars.withUnsafeMutableBufferPointer { yb in
        let ya = Address(yb.baseAddress!)
        let parts = Parallel.ranges(yb.count / len, parts: yb.count >= 1 << 14 ? Parallel.width : 1)
        Parallel.forEach(parts.count) { part in
            for r in parts[part] { softmaxRow(ya.pointer + r * len, count: len) }
        }
    }
    return y
}

/// In-place softmax of one contiguous row.
@inlinable
public func softmaxRow(_ row: UnsafeMutablePointer<Float>, count: Int) {
    var m = Vec16(repeating: -.infinity)
    var i = 0
    while i + 16 <= count {
        m = maximum(m, row.vec16(i))
        i += 16
    }
    var rowMax = m.max()
    while i < count {
        rowMax = max(rowMax, row[i])
        i += 1
    }
    let shift = Vec16(repeating: rowMax)
    var sum: Float = 0
    map16(UnsafePointer(row), row, count) { v in exp(v - shift) }
    for j in 0..<count { sum += row[j] }
    let scale = Vec16(repeating: 1 / sum)
    map16(UnsafePointer(row), row, count) { $0 * scale }
}

extension Reference {
    public static func softmax(_ x: Tensor) -> Tensor {
        let len = x.shape.last!
        var y = x
        for r in 0..<(x.count / len) {
            let row = x.scalars[(r * len)..<((r + 1) * len)].map(Double.init)
            let m = row.max()!
            let e = row.map { Foundation.exp($0 - m) }
            let s = e.reduce(0, +)
            for j in 0..<len { y.scalars[r * len + j] = Float(e[j] / s) }
        }
        return y
    }
}

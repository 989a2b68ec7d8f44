/// Concatenation along `axis` (YOLO concatenates channels, axis 1). All other dims must match.
/// Each input contributes one contiguous block per index of the leading axes.
public func concat(_ parts: [Tensor], axis: Int) -> Tensor {
    precondition(!parts.isEmpty, "concat: no inputs")
    let shape0 = parts[0].shape
    precondition(axis >= 0 && axis < shape0.count, "concat: axis \(axis) for rank \(shape0.count)")
    for t in parts {
        precondition(t.rank == shape0.count && zip(t.shape, shape0).enumerated().allSatisfy { $0.offset == axis || $0.element.0 == $0.element.1 },
                     "concat: shape \(t.shape) does not fit \(shape0) along axis \(axis)")
    }
    let outer = shape0[..<axis].reduce(1, *), inner = shape0[(axis + 1)...].reduce(1, *)
    var shape = shape0
    shape[axis] = parts.reduce(0) { $0 + $1.shape[axis] }
    return Tensor(shape: shape) { y in
        var offset = 0
        for o in 0..<outer {
            for t in parts {
                let block = t.shape[axis] * inner
                t.scalars.withUnsafeBufferPointer { copy($0.baseAddress! + o * block, y.baseAddress! + offset, count: block) }
                offset += block
            }
        }
    }
}

/// dst[0..<count] = src[0..<count], split over the threads when it is large (a single thread
/// does not saturate this machine's memory bandwidth).
func copy(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>, count: Int) {
    guard count >= 1 << 15 && Parallel.width > 1 else { return dst.initialize(from: src, count: count) }
    let parts = Parallel.ranges(count, parts: Parallel.width, align: 16)
    Parallel.forEach(parts.count, CopyRanges(src: Address(src), dst: Address(dst), parts: parts))
}

/// `copy`'s part: a range of the floats.
private struct CopyRanges: ParallelWork {
    let src: Address<Float>, dst: Address<Float>
    let parts: Partition

    func run(part t: Int) {
        (dst.pointer + parts[t].lowerBound).initialize(from: src.pointer + parts[t].lowerBound, count: parts[t].count)
    }
}

/// Splits along `axis` into parts of the given sizes (their sum must be the axis length).
public func split(_ x: Tensor, sizes: [Int], axis: Int) -> [Tensor] {
    precondition(axis >= 0 && axis < x.rank && sizes.reduce(0, +) == x.shape[axis] && sizes.allSatisfy { $0 >= 0 },
                 "split: sizes \(sizes) along axis \(axis) of \(x.shape)")
    var start = 0
    return sizes.map { size in
        defer { start += size }
        return slice(x, start..<(start + size), axis: axis)
    }
}

/// The indices `range` of `axis`, copied.
public func slice(_ x: Tensor, _ range: Range<Int>, axis: Int) -> Tensor {
    precondition(axis >= 0 && axis < x.rank && range.lowerBound >= 0 && range.upperBound <= x.shape[axis],
                 "slice: \(range) along axis \(axis) of \(x.shape)")
    let outer = x.shape[..<axis].reduce(1, *), inner = x.shape[(axis + 1)...].reduce(1, *)
    let row = x.shape[axis] * inner, size = range.count
    var shape = x.shape
    shape[axis] = size
    return Tensor(shape: shape) { y in
        x.scalars.withUnsafeBufferPointer { xb in
            for o in 0..<outer {
                copy(xb.baseAddress! + o * row + range.lowerBound * inner, y.baseAddress! + o * size * inner, count: size * inner)
            }
        }
    }
}

extension Reference {
    /// Element by element through multi-indices.
    public static func concat(_ parts: [Tensor], axis: Int) -> Tensor {
        var shape = parts[0].shape
        shape[axis] = parts.reduce(0) { $0 + $1.shape[axis] }
        var y = Tensor(zeros: shape)
        var offset = 0
        for t in parts {
            for (flat, v) in t.scalars.enumerated() {
                var index = multiIndex(flat, t.shape)
                index[axis] += offset
                y.scalars[flatIndex(index, shape)] = v
            }
            offset += t.shape[axis]
        }
        return y
    }

    public static func split(_ x: Tensor, sizes: [Int], axis: Int) -> [Tensor] {
        var start = 0
        return sizes.map { size in
            var shape = x.shape
            shape[axis] = size
            var y = Tensor(zeros: shape)
            for flat in 0..<y.count {
                var index = multiIndex(flat, shape)
                index[axis] += start
                y.scalars[flat] = x.scalars[flatIndex(index, x.shape)]
            }
            start += size
            return y
        }
    }

    static func multiIndex(_ flat: Int, _ shape: [Int]) -> [Int] {
        var index = [Int](repeating: 0, count: shape.count), rest = flat
        for d in stride(from: shape.count - 1, through: 0, by: -1) {
            index[d] = rest % shape[d]
            rest /= shape[d]
        }
        return index
    }

    static func flatIndex(_ index: [Int], _ shape: [Int]) -> Int {
        zip(index, shape).reduce(0) { $0 * $1.1 + $1.0 }
    }
}

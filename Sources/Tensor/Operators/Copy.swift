/// dst[0..<count] = src[0..<count], split over the threads when it is large (one thread does not
/// saturate the memory bandwidth).
func copy(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>, count: Int) {
    guard count >= 1 << 15 && Parallel.width > 1 else { return dst.initialize(from: src, count: count) }
    let parts = Parallel.ranges(count, parts: Parallel.width, align: 16)
    Parallel.forEach(parts.count, CopyRanges(src: Address(src), dst: Address(dst), parts: parts))
}

/// `copy`'s part: a range of the floats.
private struct CopyRanges: ParallelWork {
    let src: Address<Float>, dst: Address<Float>
    let parts: Partition

    func run(part t: Int, thread _: Int) {
        (dst.pointer + parts[t].lowerBound).initialize(from: src.pointer + parts[t].lowerBound, count: parts[t].count)
    }
}

/// Row r of `rows` (`count` floats) from src + r · srcStride to dst + r · dstStride, split over the
/// threads by rows when it is large (a head's [C, H·W] map into its [C, anchors] rows: serial, it
/// left one of two threads idle).
package func copyRows(_ src: UnsafePointer<Float>, stride srcStride: Int, into dst: UnsafeMutablePointer<Float>,
                      stride dstStride: Int, rows: Int, count: Int) {
    let parts = Parallel.ranges(rows, parts: rows * count >= 1 << 15 ? Parallel.width : 1)
    Parallel.forEach(parts.count, CopyRows(src: Address(src), dst: Address(dst), srcStride: srcStride,
                                           dstStride: dstStride, count: count, parts: parts))
}

/// `copyRows`'s part: a range of the rows.
private struct CopyRows: ParallelWork {
    let src: Address<Float>, dst: Address<Float>
    let srcStride: Int, dstStride: Int, count: Int
    let parts: Partition

    func run(part t: Int, thread _: Int) {
        for r in parts[t] { (dst.pointer + r * dstStride).update(from: src.pointer + r * srcStride, count: count) }
    }
}

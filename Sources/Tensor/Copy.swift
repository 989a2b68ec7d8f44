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

    func run(part t: Int, thread _: Int) {
        (dst.pointer + parts[t].lowerBound).initialize(from: src.pointer + parts[t].lowerBound, count: parts[t].count)
    }
}

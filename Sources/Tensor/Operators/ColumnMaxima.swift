/// For each column j of x [rows, columns] (row-major), the largest of x[·, j] into `maxima[j]`
/// and the first row holding it into `argmax[j]` (NaNs never win). Split over the threads by
/// blocks of columns when large; each block's maxima stay in L1 while every row's share of the
/// block is read in one sweep (a vector of columns through all the rows read each row a line at
/// a time, too many streams for the prefetcher).
package func columnMaxima(_ x: UnsafePointer<Float>, rows: Int, columns: Int, _ maxima: UnsafeMutablePointer<Float>,
                          _ argmax: UnsafeMutablePointer<Int32>) {
    let blocks = Parallel.ranges(columns, parts: (columns + 1023) / 1024, align: 16)
    Parallel.forEach(blocks.count, threads: rows * columns >= 1 << 15 ? Parallel.width : 1, ColumnMaxima(
        x: Address(x), maxima: Address(maxima), argmax: Address(argmax), blocks: blocks, rows: rows, columns: columns))
}

/// `columnMaxima`'s part: a block of columns.
private struct ColumnMaxima: ParallelWork {
    let x: Address<Float>, maxima: Address<Float>, argmax: Address<Int32>
    let blocks: Partition
    let rows: Int, columns: Int

    func run(part: Int, thread _: Int) {
        let block = blocks[part], n = block.count
        let best = maxima.pointer + block.lowerBound, label = argmax.pointer + block.lowerBound
        best.initialize(repeating: -.infinity, count: n)
        label.initialize(repeating: 0, count: n)
        for r in 0..<rows {
            let row = UnsafePointer(x.pointer + r * columns + block.lowerBound), index = SIMD16<Int32>(repeating: Int32(r))
            var i = 0
            while i + 16 <= n {
                let v = row.vec16(i)
                var m = UnsafePointer(best).vec16(i)
                var k = UnsafeRawPointer(label + i).loadUnaligned(as: SIMD16<Int32>.self)
                let greater = v .> m
                m.replace(with: v, where: greater)
                k.replace(with: index, where: greater)
                best.store(m, at: i)
                UnsafeMutableRawPointer(label + i).storeBytes(of: k, as: SIMD16<Int32>.self)
                i += 16
            }
            for j in i..<n where row[j] > best[j] {
                best[j] = row[j]
                label[j] = Int32(r)
            }
        }
    }
}

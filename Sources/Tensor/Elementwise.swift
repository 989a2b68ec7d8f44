import CTargetFeatures
import Foundation

/// Activation applied in a kernel's epilogue.
public enum Activation: Sendable, Equatable {
    case none, silu, sigmoid
}

/// dst[i] = activation(src[i]) for i < count; `dst` may be `src`.
public func applyActivation(_ activation: Activation, _ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>,
                            count: Int) {
    if wideVectors {
        applyActivation(Vec16.self, activation, src, dst, count: count)
    } else {
        applyActivation(Vec8.self, activation, src, dst, count: count)
    }
}

@inline(__always)
private func applyActivation<V: FloatVector>(_: V.Type, _ activation: Activation, _ src: UnsafePointer<Float>,
                                             _ dst: UnsafeMutablePointer<Float>, count: Int) {
    switch activation {
    case .none: if UnsafePointer(dst) != src { dst.update(from: src, count: count) }
    case .silu: mapVectors(src, dst, count) { (x: V) in silu(x) }
    case .sigmoid: mapVectors(src, dst, count) { (x: V) in sigmoid(x) }
    }
}

/// `activation(x)` elementwise, split over the threads when it is large (Detect's 80 × 8400
/// class scores: a copy, then one thread in place, took 0.9 ms on Zen 3).
public func activated(_ x: Tensor, _ activation: Activation) -> Tensor {
    Tensor(shape: x.shape) { y in
        x.scalars.withUnsafeBufferPointer { activate(activation, $0.baseAddress!, y.baseAddress!, count: y.count) }
    }
}

/// `applyActivation` split over the threads when it is large; `dst` may be `src`.
package func activate(_ activation: Activation, _ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>, count: Int) {
    let parts = Parallel.ranges(count, parts: count >= 1 << 15 ? Parallel.width : 1, align: 16)
    Parallel.forEach(parts.count, ActivationRanges(src: Address(src), dst: Address(dst), parts: parts, activation: activation))
}

/// `activate`'s part: a range of the floats.
private struct ActivationRanges: ParallelWork {
    let src: Address<Float>, dst: Address<Float>
    let parts: Partition
    let activation: Activation

    func run(part t: Int, thread _: Int) {
        let r = parts[t]
        applyActivation(activation, src.pointer + r.lowerBound, dst.pointer + r.lowerBound, count: r.count)
    }
}

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

/// a + b elementwise; shapes must match.
public func add(_ a: Tensor, _ b: Tensor) -> Tensor {
    precondition(a.shape == b.shape, "add: shapes \(a.shape) and \(b.shape) differ")
    return Tensor(shape: a.shape) { yp in
        a.scalars.withUnsafeBufferPointer { ap in
            b.scalars.withUnsafeBufferPointer { bp in
                addVectors(ap.baseAddress!, bp.baseAddress!, into: yp.baseAddress!, count: yp.count)
            }
        }
    }
}

/// Plain implementations: the oracles the fast kernels are tested against.
public enum Reference {
    public static func activated(_ x: Tensor, _ activation: Activation) -> Tensor {
        Tensor(shape: x.shape, scalars: x.scalars.map { activate(Double($0), activation) })
    }

    package static func activate(_ x: Double, _ activation: Activation) -> Float {
        switch activation {
        case .none: return Float(x)
        case .silu: return Float(x / (1 + Foundation.exp(-x)))
        case .sigmoid: return Float(1 / (1 + Foundation.exp(-x)))
        }
    }

    public static func add(_ a: Tensor, _ b: Tensor) -> Tensor {
        precondition(a.shape == b.shape)
        return Tensor(shape: a.shape, scalars: zip(a.scalars, b.scalars).map { $0 + $1 })
    }
}

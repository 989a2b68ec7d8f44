import CTargetFeatures
import Foundation

/// Activation applied in a kernel's epilogue. `leakyReLU` has PyTorch's common slope 0.1 (the
/// one YOLO variants use), fixed so that every epilogue specializes it as a constant.
public enum Activation: Sendable, Equatable {
    case none, silu, sigmoid, relu, leakyReLU
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
    case .relu: mapVectors(src, dst, count) { (x: V) in relu(x) }
    case .leakyReLU: mapVectors(src, dst, count) { (x: V) in leakyReLU(x) }
    }
}

/// `activation(x)` elementwise, split over the threads when it is large (Detect's class scores).
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

extension Reference {
    public static func activated(_ x: Tensor, _ activation: Activation) -> Tensor {
        Tensor(shape: x.shape, scalars: x.scalars.map { activate(Double($0), activation) })
    }

    package static func activate(_ x: Double, _ activation: Activation) -> Float {
        switch activation {
        case .none: return Float(x)
        case .silu: return Float(x / (1 + Foundation.exp(-x)))
        case .sigmoid: return Float(1 / (1 + Foundation.exp(-x)))
        case .relu: return Float(max(x, 0))
        case .leakyReLU: return Float(x < 0 ? 0.1 * x : x)
        }
    }

    public static func add(_ a: Tensor, _ b: Tensor) -> Tensor {
        precondition(a.shape == b.shape)
        return Tensor(shape: a.shape, scalars: zip(a.scalars, b.scalars).map { $0 + $1 })
    }
}

import Foundation

/// Activation applied in a kernel's epilogue.
public enum Activation: Sendable, Equatable {
    case none, silu, sigmoid
}

/// Applies `activation` in place to `count` floats.
@inlinable
public func applyActivation(_ activation: Activation, _ p: UnsafeMutablePointer<Float>, count: Int) {
    switch activation {
    case .none: break
    case .silu: map16(UnsafePointer(p), p, count, silu)
    case .sigmoid: map16(UnsafePointer(p), p, count, sigmoid)
    }
}

/// `activation(x)` elementwise.
public func activated(_ x: Tensor, _ activation: Activation) -> Tensor {
    var y = x
    y.scalars.withUnsafeMutableBufferPointer { applyActivation(activation, $0.baseAddress!, count: $0.count) }
    return y
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

/// A dense, contiguous Float32 tensor in row-major order; images are NCHW.
///
/// A value type: copies are copy-on-write through the backing array, so results can be
/// handed across tasks freely. Kernels work on raw buffers; this type only carries shape.
public struct Tensor: Sendable, Equatable {
    public private(set) var shape: [Int]
    public var scalars: [Float]

    public init(shape: [Int], scalars: [Float]) {
        precondition(shape.allSatisfy { $0 >= 0 }, "negative dimension in \(shape)")
        precondition(shape.reduce(1, *) == scalars.count,
                     "shape \(shape) holds \(shape.reduce(1, *)) scalars, got \(scalars.count)")
        self.shape = shape
        self.scalars = scalars
    }

    /// A zero-filled tensor.
    public init(zeros shape: [Int]) {
        self.init(shape: shape, scalars: [Float](repeating: 0, count: shape.reduce(1, *)))
    }

    /// A tensor whose every scalar `initializer` writes (the buffer starts uninitialized:
    /// no zero-fill pass for outputs a kernel overwrites anyway).
    public init(shape: [Int], uninitialized initializer: (UnsafeMutableBufferPointer<Float>) -> Void) {
        let count = shape.reduce(1, *)
        self.init(shape: shape, scalars: [Float](unsafeUninitializedCapacity: count) { buffer, initialized in
            initializer(buffer)
            initialized = count
        })
    }

    public var count: Int { scalars.count }
    public var rank: Int { shape.count }

    /// Element strides of the contiguous layout.
    public var strides: [Int] { Tensor.contiguousStrides(shape) }

    public static func contiguousStrides(_ shape: [Int]) -> [Int] {
        var strides = [Int](repeating: 1, count: shape.count)
        var s = 1
        for i in stride(from: shape.count - 1, through: 0, by: -1) {
            strides[i] = s
            s *= shape[i]
        }
        return strides
    }

    /// The same scalars under another shape with the same element count.
    public func reshaped(_ newShape: [Int]) -> Tensor {
        Tensor(shape: newShape, scalars: scalars)
    }

    public subscript(index: Int...) -> Float {
        get { scalars[flatIndex(index)] }
        set { scalars[flatIndex(index)] = newValue }
    }

    private func flatIndex(_ index: [Int]) -> Int {
        precondition(index.count == shape.count, "index \(index) for shape \(shape)")
        var flat = 0
        for (i, d) in zip(index, shape) {
            precondition(i >= 0 && i < d, "index \(index) out of range for shape \(shape)")
            flat = flat * d + i
        }
        return flat
    }
}

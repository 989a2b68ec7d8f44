import Tensor

/// SplitMix64: a fixed-seed generator so every failure reproduces.
public struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// A tensor of `shape` with uniform values in `range`, the same for the same seed.
public func randomTensor(_ shape: [Int], seed: UInt64, range: ClosedRange<Float> = -1...1) -> Tensor {
    var g = SeededGenerator(seed: seed)
    return Tensor(shape: shape, scalars: (0..<shape.reduce(1, *)).map { _ in Float.random(in: range, using: &g) })
}

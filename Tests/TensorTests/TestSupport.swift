import Tensor
import XCTest

/// SplitMix64: a fixed-seed generator so every failure reproduces.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

func randomTensor(_ shape: [Int], seed: UInt64, range: ClosedRange<Float> = -1...1) -> Tensor {
    var g = SeededGenerator(seed: seed)
    return Tensor(shape: shape, scalars: (0..<shape.reduce(1, *)).map { _ in Float.random(in: range, using: &g) })
}

/// Float32 accumulation error grows with the number of terms summed (`reduction`).
func tolerance(reduction: Int) -> Float { 1e-5 + 5e-7 * Float(reduction) }

/// Fails with the first offending index, the expected and actual values, and the worst error.
func assertClose(_ actual: Tensor, _ expected: Tensor, tolerance: Float, _ what: @autoclosure () -> String,
                 file: StaticString = #filePath, line: UInt = #line) {
    guard actual.shape == expected.shape else {
        XCTFail("\(what()): shape \(actual.shape), expected \(expected.shape)", file: file, line: line)
        return
    }
    var worst: Float = 0
    var first: Int?
    for i in 0..<actual.count {
        let e = abs(actual.scalars[i] - expected.scalars[i])
        if !(e <= tolerance) && first == nil { first = i }
        if !(e <= worst) { worst = e }
    }
    if let i = first {
        XCTFail("\(what()): index \(i) of \(actual.shape): expected \(expected.scalars[i]), actual \(actual.scalars[i]); "
                + "max |Δ| \(worst) > tolerance \(tolerance)", file: file, line: line)
    }
}

import Tensor
import XCTest

/// Float32 accumulation error grows with the number of terms summed (`reduction`).
public func tolerance(reduction: Int) -> Float { 1e-5 + 5e-7 * Float(reduction) }

/// The index of flat `offset` in a row-major tensor of `shape`, as `(n, c, y, x)` for rank 4.
public func position(of offset: Int, in shape: [Int]) -> String {
    var rest = offset, index = [Int](repeating: 0, count: shape.count)
    for d in shape.indices.reversed() where shape[d] > 0 {
        index[d] = rest % shape[d]
        rest /= shape[d]
    }
    return "(" + index.map(String.init).joined(separator: ", ") + ")"
}

/// Fails with the first offending element's position (`(n, c, y, x)` for rank 4), the expected
/// and actual values, and the worst error.
public func assertClose(_ actual: Tensor, _ expected: Tensor, tolerance: Float, _ what: @autoclosure () -> String,
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
        XCTFail("\(what()): at \(position(of: i, in: actual.shape)) of \(actual.shape): expected \(expected.scalars[i]), "
                + "actual \(actual.scalars[i]); max |Δ| \(worst) > tolerance \(tolerance)", file: file, line: line)
    }
}

/// max |actual − expected| over all elements, or fails on a shape mismatch.
public func maxAbsDifference(_ actual: Tensor, _ expected: Tensor, _ what: String,
                             file: StaticString = #filePath, line: UInt = #line) -> Float {
    guard actual.shape == expected.shape else {
        XCTFail("\(what): shape \(actual.shape), reference \(expected.shape)", file: file, line: line)
        return .infinity
    }
    var worst: Float = 0
    for (a, e) in zip(actual.scalars, expected.scalars) where !(abs(a - e) <= worst) { worst = abs(a - e) }
    return worst
}

/// max |t| over all elements.
public func maxAbs(_ t: Tensor) -> Float { t.scalars.reduce(0) { max($0, abs($1)) } }

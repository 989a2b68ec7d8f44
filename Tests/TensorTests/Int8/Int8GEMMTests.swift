import Foundation
import Tensor
import TestSupport
import XCTest

/// `int8GEMM` against plain integer loops: odd shapes, rows of B at scattered offsets, the
/// extremes of both operands (no Int16 saturation), and the float epilogue.
final class Int8GEMMTests: XCTestCase {
    /// Grid columns `first ..< n` (a thread's part when first > 0) in runs of `runs.length` every
    /// `runs.stride` (nil: one run).
    private func check(m: Int, steps: Int, first: Int = 0, n: Int, runs: (length: Int, stride: Int)? = nil,
                       extremes: Bool = false, epilogue: Bool, residual: Bool = false, panel: Bool = false, seed: UInt64,
                       file: StaticString = #filePath, line: UInt = #line) {
        var g = SeededGenerator(seed: seed)
        func weightByte() -> UInt32 {
            UInt32(UInt8(bitPattern: extremes ? (Bool.random(using: &g) ? 63 : -63) : Int8.random(in: -63...63, using: &g)))
        }
        // A: [⌈m/4⌉][steps][4][4 bytes], zero rows past m; B: rows of ldb columns, read up to 7 past n.
        var a = [UInt32](repeating: 0, count: (m + 3) / 4 * steps * 4)
        for r in 0..<m {
            for i in 0..<steps {
                a[(r / 4 * steps + i) * 4 + r % 4] = (0..<4).reduce(0) { $0 | weightByte() << (8 * $1) }
            }
        }
        let ldb = n + 12
        let b = (0..<(steps * ldb)).map { _ in extremes ? UInt32.max : UInt32.random(in: 0...UInt32.max, using: &g) }
        let rows = (0..<steps).map { ($0 * 7 % steps) * ldb }
        let offsets = (0..<m).map { _ in epilogue ? Int32.random(in: -1000...1000, using: &g) : 0 }
        let scales = (0..<m).map { _ in epilogue ? Float.random(in: 0.001...0.1, using: &g) : 1 }
        let bias = (0..<m).map { _ in epilogue ? Float.random(in: -1...1, using: &g) : 0 }
        let (length, stride) = runs ?? (n, n)
        // C's columns: the grid columns q with q % stride < length, at q / stride · length + q % stride.
        func column(_ q: Int) -> Int { q / stride * length + q % stride }
        let kept = (first..<n).filter { $0 % stride < length }, ldc = (0..<n).filter { $0 % stride < length }.count + 3
        let written = Set(kept.map(column))
        let res = (0..<(m * ldc)).map { _ in residual ? Float.random(in: -1...1, using: &g) : 0 }
        var c = [Float](repeating: .nan, count: m * ldc), staging = [Float](repeating: .nan, count: 128)
        var extent = Self.emptyExtent
        let packed = panel ? UnsafeMutableRawPointer.allocate(byteCount: int8PanelBytes(steps: steps), alignment: 64) : nil
        defer { packed?.deallocate() }
        c.withUnsafeMutableBufferPointer { pc in
            int8GEMM(a, m: m, steps: steps, b: b, rows: rows, columns: first..<n, runs: (length, stride), c: pc.baseAddress!,
                     ldc: ldc, residual: residual ? res : nil,
                     Int8Epilogue(offsets: offsets, scales: scales, bias: bias, activation: .none), staging: &staging,
                     extent: &extent, panel: packed)
        }
        checkExtent(extent, of: (0..<m).flatMap { r in kept.map { c[r * ldc + column($0)] } },
                    "m \(m) steps \(steps) n \(n) runs \(length)/\(stride)", file: file, line: line)
        let sums = Reference.int8GEMM(a, m: m, steps: steps, b: b, rows: rows, n: n)
        for r in 0..<m {
            for q in kept {
                let out = column(q), expected = Float(sums[r * n + q] - offsets[r]) * scales[r] + bias[r] + res[r * ldc + out]
                guard c[r * ldc + out] == expected else {
                    return XCTFail("m \(m) steps \(steps) n \(n) runs \(length)/\(stride): C[\(r), \(out)] = "
                                   + "\(c[r * ldc + out]), expected \(expected)", file: file, line: line)
                }
            }
            for out in 0..<ldc where !written.contains(out) && !c[r * ldc + out].isNaN {
                return XCTFail("m \(m) n \(n): C[\(r), \(out)] outside the columns written", file: file, line: line)
            }
        }
    }

    /// 8 lower bounds at +∞, then 8 upper at −∞.
    private static let emptyExtent = [Float](repeating: .infinity, count: 8) + [Float](repeating: -.infinity, count: 8)

    /// The extent's lanes bound exactly the floats written.
    private func checkExtent(_ extent: [Float], of written: [Float], _ what: String, file: StaticString = #filePath,
                             line: UInt = #line) {
        XCTAssertEqual(extent[..<8].min(), written.min(), "\(what): lower bound", file: file, line: line)
        XCTAssertEqual(extent[8...].max(), written.max(), "\(what): upper bound", file: file, line: line)
    }

    func testOddShapesExact() {
        var seed: UInt64 = 1
        for m in [1, 3, 4, 5, 9, 17] {
            for steps in [1, 2, 7, 33] {
                for n in [1, 7, 8, 9, 16, 17, 31, 40] {
                    check(m: m, steps: steps, n: n, epilogue: seed % 2 == 0, seed: seed)
                    seed += 1
                }
            }
        }
    }

    /// Grids whose rows are wider than C's (a convolution's junk columns), with a residual.
    func testRunsAndResidual() {
        var seed: UInt64 = 500
        for (n, length, stride) in [(44, 20, 22), (40, 5, 8), (17, 1, 3), (100, 16, 17), (96, 15, 16), (9, 9, 11)] {
            check(m: 6, steps: 5, n: n, runs: (length, stride), epilogue: true, residual: seed % 2 == 0, seed: seed)
            seed += 1
        }
        check(m: 5, steps: 3, n: 37, epilogue: true, residual: true, seed: 9)
        // Parts starting in a run's last columns, in junk columns, and mid-run; rows without junk
        // columns (one run).
        for (first, n, length, stride) in [(18, 70, 20, 22), (41, 88, 20, 22), (42, 88, 20, 22), (5, 50, 16, 17),
                                           (3, 30, 5, 8), (4, 60, 20, 20)] {
            check(m: 5, steps: 4, first: first, n: n, runs: (length, stride), epilogue: true, residual: first % 2 == 1,
                  seed: UInt64(first))
        }
    }

    /// Strips copying their B rows into a panel first: the same sums, in and across runs.
    func testPanel() {
        var seed: UInt64 = 900
        for (m, steps, first, n, length, stride) in [(9, 33, 0, 40, 40, 40), (17, 7, 0, 44, 20, 22), (5, 4, 41, 88, 20, 22),
                                                     (4, 2, 0, 17, 17, 17), (6, 5, 5, 50, 16, 17)] {
            check(m: m, steps: steps, first: first, n: n, runs: (length, stride), epilogue: true, residual: seed % 2 == 0,
                  panel: true, seed: seed)
            seed += 1
        }
        check(m: 8, steps: 300, n: 24, extremes: true, epilogue: false, panel: true, seed: 7)
    }

    /// Bytes of 255 times weights of ±63: every Int16 pair sum at its largest magnitude.
    func testExtremesDoNotSaturate() {
        check(m: 8, steps: 300, n: 24, extremes: true, epilogue: false, seed: 7)
        check(m: 5, steps: 9, n: 9, extremes: true, epilogue: true, seed: 8)
    }

    func testActivations() {
        let (m, steps, n) = (5, 3, 19)
        var g = SeededGenerator(seed: 3)
        let a = (0..<((m + 3) / 4 * steps * 4)).map { _ in UInt32.random(in: 0...UInt32.max, using: &g) & 0x3F3F_3F3F }
        let b = (0..<(steps * 32)).map { _ in UInt32.random(in: 0...UInt32.max, using: &g) }
        let rows = (0..<steps).map { $0 * 32 }, offsets = [Int32](repeating: 20_000, count: m)
        let scales = [Float](repeating: 1e-4, count: m), bias = [Float](repeating: 0.5, count: m)
        let sums = Reference.int8GEMM(a, m: m, steps: steps, b: b, rows: rows, n: n)
        for (activation, f) in [(Activation.silu, { (x: Float) in x / (1 + Foundation.exp(-x)) }),
                                (.sigmoid, { (x: Float) in 1 / (1 + Foundation.exp(-x)) }),
                                (.relu, { (x: Float) in max(x, 0) }), (.leakyReLU, { (x: Float) in x < 0 ? 0.1 * x : x })] {
            var c = [Float](repeating: .nan, count: m * 24), staging = [Float](repeating: .nan, count: 128)
            var extent = Self.emptyExtent
            c.withUnsafeMutableBufferPointer { pc in
                int8GEMM(a, m: m, steps: steps, b: b, rows: rows, columns: 0..<n, runs: (n, n), c: pc.baseAddress!, ldc: 24,
                         residual: nil, Int8Epilogue(offsets: offsets, scales: scales, bias: bias, activation: activation),
                         staging: &staging, extent: &extent)
            }
            checkExtent(extent, of: (0..<m).flatMap { c[($0 * 24)..<($0 * 24 + n)] }, "\(activation)")
            for r in 0..<m {
                for j in 0..<n {
                    let expected = f(Float(sums[r * n + j] - offsets[r]) * scales[r] + bias[r])
                    // The coarse sigmoid: 1.23e-4 from exp, 1.5 · 2⁻¹² from `vrcpps`.
                    XCTAssertEqual(c[r * 24 + j], expected, accuracy: 5e-4 * abs(expected) + 1e-6, "\(activation) C[\(r), \(j)]")
                }
            }
        }
    }
}

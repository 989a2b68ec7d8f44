import Foundation
import Tensor
import TestSupport
import XCTest

/// `quantizedConv2d` against the integer reference (exact: the same quantized operands and float
/// steps), and against the float convolution within the bound quantization allows. Every run
/// also checks the range it returns against y's, and that given x's range it computes the same y.
final class QuantizedConv2DTests: XCTestCase {
    private func run(_ x: Tensor, _ weight: QuantizedConvWeights, bias: [Float], _ p: Conv2DParameters,
                     activation: Activation = .none, residual: Tensor? = nil,
                     file: StaticString = #filePath, line: UInt = #line) -> Tensor {
        let (ho, wo) = p.outputSize(h: x.shape[2], w: x.shape[3])
        let cout = weight.shape[0], scratch = Scratch()
        func convolve(_ range: ValueRange?) -> (Tensor, ValueRange?) {
            var measured: ValueRange?
            let y = Tensor(shape: [1, cout, ho, wo]) { yb in
                let y = Map(yb.baseAddress!, channels: cout, height: ho, width: wo)
                x.withMap { x in
                    let x = x.bounded(by: range)
                    measured = residual.map { residual in
                        residual.withMap {
                            quantizedConv2d(x, weight: weight, bias: bias, p, activation: activation, residual: $0, into: y, scratch: scratch)
                        }
                    } ?? quantizedConv2d(x, weight: weight, bias: bias, p, activation: activation, into: y, scratch: scratch)
                }
            }
            return (y, measured)
        }
        let (y, range) = convolve(nil)
        guard (x.scalars + y.scalars).allSatisfy(\.isFinite) else { return y }
        XCTAssertEqual(range, ValueRange(lower: y.scalars.min()!, upper: y.scalars.max()!), "returned range", file: file, line: line)
        let given = convolve(ValueRange(lower: x.scalars.min()!, upper: x.scalars.max()!)).0
        XCTAssertEqual(given.scalars, y.scalars, "with x's range given", file: file, line: line)
        return y
    }

    private func quantization(of x: Tensor) -> ActivationQuantization {
        ActivationQuantization(minimum: x.scalars.min()!, maximum: x.scalars.max()!)
    }

    /// A random input, weights and bias from `seed` through the convolution, against the integer
    /// reference.
    private func checkAgainstReference(cin: Int, cout: Int, h: Int, w: Int, _ p: Conv2DParameters, seed: UInt64,
                                       file: StaticString = #filePath, line: UInt = #line) {
        let x = randomTensor([1, cin, h, w], seed: seed, range: -0.3...2)
        let weight = QuantizedConvWeights(randomTensor([cout, cin, p.kernelH, p.kernelW], seed: seed &+ 1))
        let bias = randomTensor([cout], seed: seed &+ 2).scalars
        let expected = Reference.quantizedConv2d(x, weight: weight, bias: bias, p, quantization(of: x))
        XCTAssertEqual(run(x, weight, bias: bias, p).scalars, expected.scalars, "cin \(cin) cout \(cout) \(h)×\(w) \(p)",
                       file: file, line: line)
    }

    func testOddShapesMatchIntegerReference() {
        var seed: UInt64 = 1
        for (cin, cout) in [(1, 1), (3, 7), (5, 4), (8, 3), (13, 17)] {
            for (h, w) in [(1, 1), (5, 5), (13, 13), (9, 16), (6, 37)] {
                for (kernel, stride, padding) in [(1, 1, 0), (3, 1, 1), (3, 2, 1), (5, 2, 2), (3, 1, 0), (1, 2, 0)]
                where min(h, w) + 2 * padding >= kernel {
                    checkAgainstReference(cin: cin, cout: cout, h: h, w: w,
                                          Conv2DParameters(kernel: kernel, stride: stride, padding: padding), seed: seed)
                    seed += 3
                }
            }
        }
    }

    /// Stride 2 with 64 output channels or more: the GEMM's strips copy their B rows into a panel.
    func testPanelMatchesIntegerReference() {
        for (cin, cout, h, w, seed) in [(13, 64, 9, 16, UInt64(60)), (5, 67, 13, 13, 63), (32, 68, 6, 37, 66)] {
            checkAgainstReference(cin: cin, cout: cout, h: h, w: w, Conv2DParameters(kernel: 3, stride: 2, padding: 1),
                                  seed: seed)
        }
    }

    func testResidualAndActivation() {
        let p = Conv2DParameters(kernel: 3, stride: 1, padding: 1)
        let x = randomTensor([1, 6, 11, 21], seed: 5, range: 0...3)
        let weight = QuantizedConvWeights(randomTensor([9, 6, 3, 3], seed: 6))
        let bias = randomTensor([9], seed: 7).scalars, residual = randomTensor([1, 9, 11, 21], seed: 8)
        let sums = Reference.quantizedConv2d(x, weight: weight, bias: bias, p, quantization(of: x))
        XCTAssertEqual(run(x, weight, bias: bias, p, residual: residual).scalars, zip(sums.scalars, residual.scalars).map(+))
        let silu = run(x, weight, bias: bias, p, activation: .silu, residual: residual)
        for (i, (s, r)) in zip(sums.scalars, residual.scalars).enumerated() {
            let activated = s / (1 + Foundation.exp(-s)), expected = activated + r
            // The int8 epilogue's coarse sigmoid (`Int8GEMMTests.testActivations`), then the sum's rounding.
            XCTAssertEqual(silu.scalars[i], expected, accuracy: 5e-4 * abs(activated) + 1e-6 * max(1, abs(expected)),
                           "element \(i)")
        }
    }

    /// An input large enough to be quantized in several blocks of rows.
    func testRowBlocksMatchIntegerReference() {
        for (kernel, stride, padding) in [(3, 2, 1), (1, 1, 0)] {
            let p = Conv2DParameters(kernel: kernel, stride: stride, padding: padding)
            let x = randomTensor([1, 3, 403, 203], seed: 40, range: 0...1)
            let weight = QuantizedConvWeights(randomTensor([5, 3, kernel, kernel], seed: 41))
            let bias = randomTensor([5], seed: 42).scalars
            let expected = Reference.quantizedConv2d(x, weight: weight, bias: bias, p, quantization(of: x))
            for threads in [1, 2, 3] {
                XCTAssertEqual(Parallel.withWidth(threads) { run(x, weight, bias: bias, p) }.scalars, expected.scalars,
                               "k\(kernel) s\(stride), \(threads) threads")
            }
        }
    }

    func testThreadCountsAgree() {
        let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
        let x = randomTensor([1, 19, 37, 29], seed: 9), weight = QuantizedConvWeights(randomTensor([70, 19, 3, 3], seed: 10))
        let bias = randomTensor([70], seed: 11).scalars
        let one = Parallel.withWidth(1) { run(x, weight, bias: bias, p) }
        for threads in [2, 3] {
            XCTAssertEqual(Parallel.withWidth(threads) { run(x, weight, bias: bias, p) }.scalars, one.scalars, "\(threads) threads")
        }
    }

    /// Each operand is off by at most half its step, so each product by at most
    /// |w|·sx/2 + |x|·sw/2 + sx·sw/4, summed over the reduction.
    func testWithinQuantizationBoundOfFloat() {
        for (kernel, stride, padding, seed) in [(1, 1, 0, UInt64(20)), (3, 1, 1, 21), (3, 2, 1, 22)] {
            let (cin, cout) = (24, 10), p = Conv2DParameters(kernel: kernel, stride: stride, padding: padding)
            let x = randomTensor([1, cin, 15, 15], seed: seed, range: -0.28...4)
            let w = randomTensor([cout, cin, kernel, kernel], seed: seed &+ 1, range: -0.5...0.5)
            let bias = randomTensor([cout], seed: seed &+ 2).scalars
            let weight = QuantizedConvWeights(w), q = quantization(of: x)
            let exact = Reference.conv2d(x, weight: w, bias: bias, p), actual = run(x, weight, bias: bias, p)
            let k = cin * kernel * kernel, maxX = maxAbs(x)
            for o in 0..<cout {
                let row = w.scalars[(o * k)..<((o + 1) * k)], sw = weight.scales[o]
                let bound = row.reduce(0) { $0 + abs($1) * q.scale / 2 + maxX * sw / 2 + q.scale * sw / 4 } + 1e-5
                let plane = exact.count / cout
                for i in (o * plane)..<((o + 1) * plane) {
                    XCTAssertLessThanOrEqual(abs(actual.scalars[i] - exact.scalars[i]), bound, "k\(kernel) s\(stride) channel \(o)")
                }
            }
        }
    }

    func testWeightQuantization() {
        var w = randomTensor([5, 3, 3, 3], seed: 30)
        for i in 27..<54 { w.scalars[i] = 0 }  // channel 1: all zero
        let q = QuantizedConvWeights(w)
        XCTAssertEqual(q.scales[1], 1)
        XCTAssertEqual(q.sums[1], 0)
        for o in [0, 2, 3, 4] {
            let row = w.scalars[(o * 27)..<((o + 1) * 27)]
            XCTAssertEqual(q.scales[o], row.map(abs).max()! / 63, "channel \(o)")
            XCTAssertEqual(q.sums[o], row.reduce(Int32(0)) { $0 + Int32(($1 / q.scales[o]).rounded()) }, "channel \(o)")
        }
    }

    /// A corrupt weight file's NaN and infinite weights, and an input holding them, give
    /// meaningless outputs but no trap.
    func testNonFiniteValuesDoNotTrap() {
        var w = randomTensor([4, 3, 3, 3], seed: 50)
        (w.scalars[0], w.scalars[1], w.scalars[30]) = (.nan, .infinity, -.infinity)
        let weight = QuantizedConvWeights(w)
        XCTAssertTrue(weight.scales.allSatisfy(\.isFinite))
        var x = randomTensor([1, 3, 9, 9], seed: 51)
        x.scalars[5] = .nan
        x.scalars[6] = .infinity
        let y = run(x, weight, bias: [0, 0, 0, 0], Conv2DParameters(kernel: 3, stride: 1, padding: 1))
        XCTAssertEqual(y.shape, [1, 4, 9, 9])
        XCTAssertEqual(ActivationQuantization(minimum: -.infinity, maximum: 1), ActivationQuantization(minimum: .nan, maximum: .nan))
    }

    /// An image's pixels k/255 under the range 0…1 (the one `YOLO` gives its networks) become
    /// bytes k exactly, in the reference and in the kernel, also where the image's own range is
    /// narrower (here 1/255 … 254/255).
    func testImagePixelsQuantizeToTheirBytes() {
        let q = ActivationQuantization(minimum: 0, maximum: 1)
        for k in 0...255 { XCTAssertEqual(Reference.quantize(Float(k) / 255, q), UInt8(k)) }
        let x = Tensor(shape: [1, 4, 8, 8], scalars: (0..<256).map { Float(1 + $0 * 167 % 254) / 255 })
        let weight = QuantizedConvWeights(randomTensor([5, 4, 3, 3], seed: 3)), bias = randomTensor([5], seed: 4).scalars
        let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
        let y = Tensor(shape: [1, 5, 4, 4]) { yb in
            x.withMap { x in
                let y = Map(yb.baseAddress!, channels: 5, height: 4, width: 4)
                quantizedConv2d(x.bounded(by: ValueRange(lower: 0, upper: 1)), weight: weight, bias: bias, p, into: y,
                                scratch: Scratch())
            }
        }
        XCTAssertEqual(y.scalars, Reference.quantizedConv2d(x, weight: weight, bias: bias, p, q).scalars)
    }

    func testActivationQuantizationKeepsZeroExact() {
        for (lo, hi) in [(-0.28, 7.5), (0.5, 3), (-4, -1), (0, 0), (2, 2)] as [(Float, Float)] {
            let q = ActivationQuantization(minimum: lo, maximum: hi)
            XCTAssertEqual(Int32(Reference.quantize(0, q)), q.zero, "[\(lo), \(hi)]")
            XCTAssertEqual(Reference.quantize(min(lo, 0), q), 0, "[\(lo), \(hi)]")
            XCTAssertEqual(Reference.quantize(max(hi, 0), q), lo == hi && lo == 0 ? 0 : 255, "[\(lo), \(hi)]")
        }
    }
}

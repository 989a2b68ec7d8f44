import Tensor
import TestSupport
import XCTest

/// Depthwise convolutions (`DepthwiseRows` at stride 1, `depthwiseConv2d` otherwise) through `conv2d`.
final class DepthwiseTests: XCTestCase {
    func testDepthwise() {
        var seed: UInt64 = 200
        for channels in [1, 3, 7, 13] {
            for size in [1, 7, 13, 127] {
                for (kernel, stride, padding) in [(3, 1, 1), (3, 2, 1), (5, 1, 2), (7, 1, 3), (3, 1, 0), (1, 1, 0)]
                where size + 2 * padding >= kernel {
                    checkConv2d(cin: channels, cout: channels, h: size, w: size == 127 ? 37 : size, kernel: kernel,
                                stride: stride, padding: padding, groups: channels, seed: seed)
                    seed += 3
                }
            }
        }
        checkConv2d(n: 2, cin: 13, cout: 13, h: 13, w: 127, kernel: 3, stride: 1, padding: 1, groups: 13, activation: .silu, seed: 7)
        // Stride-1 rows whose last vectors run side by side: one (16, 80), two (20), three (40)
        // and four (127 above) after the groups of four.
        for (w, kernel) in [(16, 3), (20, 3), (40, 3), (80, 3), (20, 5), (40, 5), (80, 5)] {
            checkConv2d(cin: 3, cout: 3, h: 6, w: w, kernel: kernel, stride: 1, padding: kernel / 2, groups: 3, activation: .silu,
                        seed: 8 &+ UInt64(w * 10 + kernel))
        }
    }

    /// Each activation, then a residual, at stride 1 (applied over each channel's plane after its
    /// rows: planes of 13 · 13 and 6 · 37 floats, not whole vectors) and 2 (per output row).
    func testDepthwiseResidual() {
        var seed: UInt64 = 900
        for (h, w, stride) in [(13, 13, 1), (6, 37, 1), (16, 80, 1), (13, 37, 2)] {
            for activation in [Activation.none, .silu, .sigmoid, .relu, .leakyReLU] {
                let (c, p) = (5, Conv2DParameters(kernel: 3, stride: stride, padding: 1, groups: 5))
                let (ho, wo) = p.outputSize(h: h, w: w)
                let x = randomTensor([1, c, h, w], seed: seed), weight = randomTensor([c, 1, 3, 3], seed: seed &+ 1)
                let bias = randomTensor([c], seed: seed &+ 2).scalars, res = randomTensor([1, c, ho, wo], seed: seed &+ 3)
                seed += 4
                var y = [Float](repeating: .nan, count: c * ho * wo)
                y.withUnsafeMutableBufferPointer { py in
                    x.withMap { xm in
                        res.withMap { rm in
                            conv2d(xm, weight: ConvWeights(weight, p), bias: bias, p, activation: activation, residual: rm,
                                   into: Map(py.baseAddress!, channels: c, height: ho, width: wo), scratch: Scratch())
                        }
                    }
                }
                let expected = Reference.add(res, Reference.conv2d(x, weight: weight, bias: bias, p, activation: activation))
                assertClose(Tensor(shape: [1, c, ho, wo], scalars: y), expected, tolerance: tolerance(reduction: 9),
                            "depthwise \(activation) residual \(h)×\(w) stride \(stride)")
            }
        }
    }
}

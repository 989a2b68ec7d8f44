import Tensor
import TestSupport
import XCTest

final class Conv2DTests: XCTestCase {
    func testDenseOddShapes() {
        var seed: UInt64 = 1
        for (cin, cout) in [(1, 1), (3, 7), (7, 13), (13, 3)] {
            for size in [1, 7, 13] {
                for kernel in [1, 3, 5] {
                    for stride in [1, 2] {
                        for padding in [0, 1, 2] where size + 2 * padding >= kernel {
                            checkConv2d(cin: cin, cout: cout, h: size, w: size, kernel: kernel, stride: stride,
                                        padding: padding, groups: 1, seed: seed)
                            seed += 3
                        }
                    }
                }
            }
        }
    }

    func testLargeSpatialAndNonSquare() {
        checkConv2d(cin: 3, cout: 7, h: 127, w: 127, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 11)
        checkConv2d(cin: 7, cout: 13, h: 127, w: 13, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 12)
        checkConv2d(cin: 13, cout: 7, h: 7, w: 127, kernel: 1, stride: 1, padding: 0, groups: 1, seed: 13)
        checkConv2d(n: 2, cin: 13, cout: 7, h: 13, w: 7, kernel: 1, stride: 1, padding: 0, groups: 1, activation: .silu, seed: 14)
        checkConv2d(n: 2, cin: 7, cout: 3, h: 13, w: 7, kernel: 3, stride: 2, padding: 0, groups: 1, seed: 15)
    }

    func testGroups() {
        var seed: UInt64 = 100
        for (cin, cout, groups) in [(2, 2, 2), (4, 6, 2), (6, 4, 2), (14, 26, 2), (6, 9, 3)] {
            for size in [1, 7, 13] {
                for (kernel, stride, padding) in [(1, 1, 0), (3, 1, 1), (3, 2, 1), (5, 2, 2), (3, 1, 0)]
                where size + 2 * padding >= kernel {
                    checkConv2d(cin: cin, cout: cout, h: size, w: size, kernel: kernel, stride: stride, padding: padding,
                                groups: groups, seed: seed)
                    seed += 3
                }
            }
        }
    }

    func testActivationsAndNoBias() {
        for activation in [Activation.none, .silu, .sigmoid, .relu, .leakyReLU] {
            checkConv2d(cin: 7, cout: 13, h: 13, w: 13, kernel: 3, stride: 1, padding: 1, groups: 1, activation: activation, seed: 300)
            checkConv2d(cin: 13, cout: 7, h: 7, w: 13, kernel: 1, stride: 1, padding: 0, groups: 1, bias: false,
                        activation: activation, seed: 301)
            checkConv2d(cin: 7, cout: 7, h: 13, w: 13, kernel: 3, stride: 1, padding: 1, groups: 7, bias: false,
                        activation: activation, seed: 302)
        }
    }

    func testYOLOShapes() {
        // First layer of every YOLO: 3 → 16 channels, 3×3 stride 2 on an odd-sized image.
        checkConv2d(cin: 3, cout: 16, h: 64, w: 48, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 400)
        // A C2PSA-sized 1×1 and a 3×3 with K = 576.
        checkConv2d(cin: 64, cout: 32, h: 20, w: 20, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 401)
        checkConv2d(cin: 128, cout: 256, h: 20, w: 15, kernel: 1, stride: 1, padding: 0, groups: 1, seed: 402)
        // Outputs whole 16-column vectors wide: one GEMM per output row (stride 1 and 2).
        checkConv2d(cin: 16, cout: 32, h: 7, w: 48, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 403)
        checkConv2d(cin: 13, cout: 7, h: 33, w: 32, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 404)
        // Stride-2 rows whose planes end in a part of 16 columns, read as the last 16 pairs.
        checkConv2d(cin: 5, cout: 9, h: 9, w: 161, kernel: 3, stride: 2, padding: 1, groups: 1, seed: 405)
        checkConv2d(cin: 5, cout: 9, h: 7, w: 80, kernel: 5, stride: 2, padding: 2, groups: 1, seed: 406)
        // Weights beyond `GEMMBlocks`' threshold (yolo26s's model.7 at a smaller size): the GEMM in blocks.
        checkConv2d(cin: 256, cout: 512, h: 13, w: 11, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 408)
        checkConv2d(cin: 1200, cout: 500, h: 5, w: 23, kernel: 1, stride: 1, padding: 0, groups: 1, seed: 409)
        // Stride-2 rows where the two phases' columns differ at both ends, or one phase has none:
        // even and odd padding, widths 1, 2, 3, 17 and 33 (all pairs, then one more column).
        for (w, kernel, padding) in [(1, 1, 0), (2, 2, 0), (3, 1, 0), (3, 5, 2), (17, 3, 1), (33, 2, 0), (33, 4, 1)] {
            checkConv2d(cin: 3, cout: 5, h: 5, w: w, kernel: kernel, stride: 2, padding: padding, groups: 1,
                        seed: 407 &+ UInt64(w * 10 + kernel))
        }
    }

    func testOutputSize() {
        let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
        XCTAssertTrue(p.outputSize(h: 640, w: 480) == (320, 240))
        XCTAssertTrue(p.outputSize(h: 7, w: 1) == (4, 1))
    }
}

/// Runs `conv2d` and `Reference.conv2d` on the same seeded data and compares (also for the
/// depthwise and Winograd tests).
func checkConv2d(n: Int = 1, cin: Int, cout: Int, h: Int, w: Int, kernel: Int, stride: Int, padding: Int,
                 groups: Int, bias: Bool = true, activation: Activation = .none, seed: UInt64,
                 file: StaticString = #filePath, line: UInt = #line) {
    let p = Conv2DParameters(kernel: kernel, stride: stride, padding: padding, groups: groups)
    let x = randomTensor([n, cin, h, w], seed: seed)
    let weight = randomTensor([cout, cin / groups, kernel, kernel], seed: seed &+ 1)
    let b = bias ? randomTensor([cout], seed: seed &+ 2).scalars : nil
    let fast = conv2d(x, weight: weight, bias: b, p, activation: activation)
    let reference = Reference.conv2d(x, weight: weight, bias: b, p, activation: activation)
    assertClose(fast, reference, tolerance: tolerance(reduction: cin / groups * kernel * kernel),
                "conv cin \(cin) cout \(cout) \(h)×\(w) k\(kernel) s\(stride) p\(padding) g\(groups) \(activation)",
                file: file, line: line)
}

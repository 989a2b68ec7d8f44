import Tensor
import XCTest

final class Conv2DTests: XCTestCase {
    /// Runs fast and reference convolutions on the same seeded data and compares.
    private func check(n: Int = 1, cin: Int, cout: Int, h: Int, w: Int, kernel: Int, stride: Int, padding: Int,
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

    func testDenseOddShapes() {
        var seed: UInt64 = 1
        for (cin, cout) in [(1, 1), (3, 7), (7, 13), (13, 3)] {
            for size in [1, 7, 13] {
                for kernel in [1, 3, 5] {
                    for stride in [1, 2] {
                        for padding in [0, 1, 2] where size + 2 * padding >= kernel {
                            check(cin: cin, cout: cout, h: size, w: size, kernel: kernel, stride: stride,
                                  padding: padding, groups: 1, seed: seed)
                            seed += 3
                        }
                    }
                }
            }
        }
    }

    func testLargeSpatialAndNonSquare() {
        check(cin: 3, cout: 7, h: 127, w: 127, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 11)
        check(cin: 7, cout: 13, h: 127, w: 13, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 12)
        check(cin: 13, cout: 7, h: 7, w: 127, kernel: 1, stride: 1, padding: 0, groups: 1, seed: 13)
        check(n: 2, cin: 13, cout: 7, h: 13, w: 7, kernel: 1, stride: 1, padding: 0, groups: 1, activation: .silu, seed: 14)
        check(n: 2, cin: 7, cout: 3, h: 13, w: 7, kernel: 3, stride: 2, padding: 0, groups: 1, seed: 15)
    }

    func testGroups() {
        var seed: UInt64 = 100
        for (cin, cout, groups) in [(2, 2, 2), (4, 6, 2), (6, 4, 2), (14, 26, 2), (6, 9, 3)] {
            for size in [1, 7, 13] {
                for (kernel, stride, padding) in [(1, 1, 0), (3, 1, 1), (3, 2, 1), (5, 2, 2), (3, 1, 0)]
                where size + 2 * padding >= kernel {
                    check(cin: cin, cout: cout, h: size, w: size, kernel: kernel, stride: stride, padding: padding,
                          groups: groups, seed: seed)
                    seed += 3
                }
            }
        }
    }

    func testDepthwise() {
        var seed: UInt64 = 200
        for channels in [1, 3, 7, 13] {
            for size in [1, 7, 13, 127] {
                for (kernel, stride, padding) in [(3, 1, 1), (3, 2, 1), (5, 1, 2), (7, 1, 3), (3, 1, 0), (1, 1, 0)]
                where size + 2 * padding >= kernel {
                    check(cin: channels, cout: channels, h: size, w: size == 127 ? 37 : size, kernel: kernel,
                          stride: stride, padding: padding, groups: channels, seed: seed)
                    seed += 3
                }
            }
        }
        check(n: 2, cin: 13, cout: 13, h: 13, w: 127, kernel: 3, stride: 1, padding: 1, groups: 13, activation: .silu, seed: 7)
        // Stride-1 rows whose last vectors run side by side: one (16, 80), two (20), three (40)
        // and four (127 above) after the groups of four.
        for (w, kernel) in [(16, 3), (20, 3), (40, 3), (80, 3), (20, 5)] {
            check(cin: 3, cout: 3, h: 6, w: w, kernel: kernel, stride: 1, padding: kernel / 2, groups: 3, activation: .silu,
                  seed: 8 &+ UInt64(w * 10 + kernel))
        }
    }

    func testActivationsAndNoBias() {
        for activation in [Activation.none, .silu, .sigmoid] {
            check(cin: 7, cout: 13, h: 13, w: 13, kernel: 3, stride: 1, padding: 1, groups: 1, activation: activation, seed: 300)
            check(cin: 13, cout: 7, h: 7, w: 13, kernel: 1, stride: 1, padding: 0, groups: 1, bias: false,
                  activation: activation, seed: 301)
            check(cin: 7, cout: 7, h: 13, w: 13, kernel: 3, stride: 1, padding: 1, groups: 7, bias: false,
                  activation: activation, seed: 302)
        }
    }

    func testYOLOShapes() {
        // First layer of every YOLO: 3 → 16 channels, 3×3 stride 2 on an odd-sized image.
        check(cin: 3, cout: 16, h: 64, w: 48, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 400)
        // A C2PSA-sized 1×1 and a 3×3 with K = 576.
        check(cin: 64, cout: 32, h: 20, w: 20, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 401)
        check(cin: 128, cout: 256, h: 20, w: 15, kernel: 1, stride: 1, padding: 0, groups: 1, seed: 402)
        // Outputs whole 16-column vectors wide: one GEMM per output row (stride 1 and 2).
        check(cin: 16, cout: 32, h: 7, w: 48, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 403)
        check(cin: 13, cout: 7, h: 33, w: 32, kernel: 3, stride: 2, padding: 1, groups: 1, activation: .silu, seed: 404)
        // Stride-2 rows whose planes end in a part of 16 columns, read as the last 16 pairs.
        check(cin: 5, cout: 9, h: 9, w: 161, kernel: 3, stride: 2, padding: 1, groups: 1, seed: 405)
        check(cin: 5, cout: 9, h: 7, w: 80, kernel: 5, stride: 2, padding: 2, groups: 1, seed: 406)
        // Stride-2 rows where the two phases' columns differ at both ends, or one phase has none:
        // even and odd padding, widths 1, 2, 3, 17 and 33 (all pairs, then one more column).
        for (w, kernel, padding) in [(1, 1, 0), (2, 2, 0), (3, 1, 0), (3, 5, 2), (17, 3, 1), (33, 2, 0), (33, 4, 1)] {
            check(cin: 3, cout: 5, h: 5, w: w, kernel: kernel, stride: 2, padding: padding, groups: 1,
                  seed: 407 &+ UInt64(w * 10 + kernel))
        }
    }

    /// 3×3 stride-1 padding-1 convolutions of 32 or more input channels (16 on AVX-512) run Winograd F(2×2, 3×3):
    /// more than one reduction pass (Cin > 64), output channels that fill no whole register tile,
    /// tile groups crossing grid rows (odd widths) and whole ones (widths a multiple of 16),
    /// several blocks of tile rows.
    func testWinogradShapes() {
        check(cin: 131, cout: 13, h: 13, w: 37, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 410)
        check(cin: 32, cout: 70, h: 36, w: 64, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .sigmoid, seed: 411)
        check(cin: 33, cout: 5, h: 127, w: 2, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 412)
        check(cin: 32, cout: 16, h: 160, w: 160, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 413)
        check(cin: 32, cout: 1, h: 1, w: 1, kernel: 3, stride: 1, padding: 1, groups: 1, seed: 414)
        check(cin: 16, cout: 8, h: 41, w: 37, kernel: 3, stride: 1, padding: 1, groups: 1, activation: .silu, seed: 415)
    }

    func testOutputSize() {
        let p = Conv2DParameters(kernel: 3, stride: 2, padding: 1)
        XCTAssertTrue(p.outputSize(h: 640, w: 480) == (320, 240))
        XCTAssertTrue(p.outputSize(h: 7, w: 1) == (4, 1))
    }
}

final class ConvTranspose2DTests: XCTestCase {
    func testAgainstReference() {
        var seed: UInt64 = 500
        for (cin, cout) in [(1, 1), (3, 7), (13, 3), (7, 13)] {
            for size in [1, 7, 13] {
                for (kernel, stride, padding) in [(2, 2, 0), (3, 1, 1), (3, 2, 1), (4, 2, 1), (1, 1, 0), (5, 3, 2)]
                where (size - 1) * stride - 2 * padding + kernel > 0 {
                    let x = randomTensor([size == 13 ? 2 : 1, cin, size, size == 7 ? 13 : size], seed: seed)
                    let weight = randomTensor([cin, cout, kernel, kernel], seed: seed + 1)
                    let bias = randomTensor([cout], seed: seed + 2).scalars
                    seed += 3
                    assertClose(convTranspose2d(x, weight: weight, bias: bias, stride: stride, padding: padding),
                                Reference.convTranspose2d(x, weight: weight, bias: bias, stride: stride, padding: padding),
                                tolerance: tolerance(reduction: cin * kernel * kernel),
                                "convTranspose cin \(cin) cout \(cout) \(size) k\(kernel) s\(stride) p\(padding)")
                }
            }
        }
        // Proto's upsample: 2×2 stride 2, on a YOLO-sized map.
        let x = randomTensor([1, 64, 20, 15], seed: 9), weight = randomTensor([64, 64, 2, 2], seed: 10)
        assertClose(convTranspose2d(x, weight: weight, bias: nil, stride: 2, padding: 0),
                    Reference.convTranspose2d(x, weight: weight, bias: nil, stride: 2, padding: 0),
                    tolerance: tolerance(reduction: 64 * 4), "proto upsample")
    }
}

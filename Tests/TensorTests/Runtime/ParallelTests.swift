import Foundation
import Tensor
import TestSupport
import XCTest

/// Kernels split their work over `Parallel.width`; every split must match the reference, and
/// the results of different thread counts must agree within 1e-5.
final class ParallelTests: XCTestCase {
    private func withThreads<T>(_ t: Int, _ body: () -> T) -> T {
        let saved = Parallel.width
        Parallel.width = t
        defer { Parallel.width = saved }
        return body()
    }

    /// Until set, one thread per core the process may run on.
    func testDefaultWidthIsTheCores() {
        XCTAssertEqual(Parallel.defaultWidth, max(1, ProcessInfo.processInfo.activeProcessorCount))
    }

    /// `width` is the count set last, at least 1.
    func testWidthIsSettable() {
        let saved = Parallel.width
        defer { Parallel.width = saved }
        for (value, expected) in [(3, 3), (1, 1), (0, 1), (-5, 1), (64, 64)] {
            Parallel.width = value
            XCTAssertEqual(Parallel.width, expected, "set \(value)")
        }
    }

    /// `withWidth` sets the count for its body's thread only, nests, and restores it after.
    func testWithWidthIsScopedToItsBody() {
        let outside = Parallel.width
        Parallel.withWidth(3) {
            XCTAssertEqual(Parallel.width, 3)
            Parallel.withWidth(0) { XCTAssertEqual(Parallel.width, 1, "at least 1") }
            Parallel.withWidth(nil) { XCTAssertEqual(Parallel.width, 3, "nil keeps the enclosing count") }
            let other = Thread { XCTAssertEqual(Parallel.width, outside, "another thread keeps its own") }
            other.start()
            while !other.isFinished { usleep(1000) }
        }
        XCTAssertEqual(Parallel.width, outside)
    }

    func testConvolutionsAgreeAcrossThreadCounts() {
        var seed: UInt64 = 500
        // (cin, cout, h, w, kernel, stride, padding, groups): 1×1, im2col (stride 1 and 2, odd
        // widths for the 16-lane stride-2 gather), depthwise, grouped, Winograd (Cin ≥ 32; 20×20 on
        // 2 threads: blocks of 55 tiles ending in an 8-wide strip).
        let cases = [(13, 7, 127, 13, 1, 1, 0, 1), (3, 16, 127, 127, 3, 2, 1, 1), (7, 13, 13, 127, 3, 1, 1, 1),
                     (13, 13, 7, 127, 3, 1, 1, 13), (7, 7, 127, 7, 3, 2, 1, 7), (6, 4, 13, 13, 3, 1, 1, 2),
                     (1, 3, 1, 1, 3, 1, 1, 1), (3, 7, 1, 127, 3, 2, 1, 1), (35, 13, 13, 127, 3, 1, 1, 1),
                     (64, 64, 20, 20, 3, 1, 1, 1)]
        for (cin, cout, h, w, k, s, pad, g) in cases {
            let p = Conv2DParameters(kernel: k, stride: s, padding: pad, groups: g)
            let x = randomTensor([1, cin, h, w], seed: seed)
            let weight = randomTensor([cout, cin / g, k, k], seed: seed &+ 1)
            let bias = randomTensor([cout], seed: seed &+ 2).scalars
            seed += 3
            let what = "cin \(cin) cout \(cout) \(h)×\(w) k\(k) s\(s) p\(pad) g\(g)"
            let reference = Reference.conv2d(x, weight: weight, bias: bias, p, activation: .silu)
            let one = withThreads(1) { conv2d(x, weight: weight, bias: bias, p, activation: .silu) }
            assertClose(one, reference, tolerance: tolerance(reduction: cin / g * k * k), what + ", 1 thread")
            for t in [2, 3] {
                let many = withThreads(t) { conv2d(x, weight: weight, bias: bias, p, activation: .silu) }
                assertClose(many, one, tolerance: 1e-5, what + ", \(t) threads vs 1")
            }
        }
    }

    /// `BLAS.sgemm` gives the same bits at any thread count, its columns split or not (a single
    /// row: Classify's linear layer, 1280 → 1000): OpenBLAS's SkylakeX kernels round a column
    /// by how many columns a call has, so the split must not follow the threads.
    func testSgemmIsBitIdenticalAcrossThreadCounts() {
        for (transA, transB) in [(false, false), (true, false), (false, true), (true, true)] {
            for (m, n, k) in [(13, 1031, 127), (1, 1000, 1280), (256, 6400, 64)] {
                let a = randomTensor(transA ? [1, k, m] : [1, m, k], seed: 1)
                let b = randomTensor(transB ? [1, n, k] : [1, k, n], seed: 2)
                func product(_ threads: Int) -> Tensor {
                    withThreads(threads) { matmul(a, b, transposeA: transA, transposeB: transB, alpha: 0.5) }
                }
                let one = product(1), shape = "\(m)×\(n)×\(k) tA \(transA) tB \(transB)"
                assertClose(one, Reference.matmul(a, b, transposeA: transA, transposeB: transB, alpha: 0.5),
                            tolerance: tolerance(reduction: k), "\(shape), 1 thread")
                for t in [2, 3] {
                    let differing = zip(product(t).scalars, one.scalars).filter { $0 != $1 }.count
                    XCTAssertEqual(differing, 0, "\(shape): values differing at \(t) threads against 1")
                }
            }
        }
    }

    func testPoolingAndSoftmaxAgreeAcrossThreadCounts() {
        for (c, h, w) in [(1, 1, 1), (3, 7, 13), (13, 13, 7), (7, 127, 13)] {
            let x = randomTensor([1, c, h, w], seed: UInt64(c * h * w))
            for (kernel, stride, padding) in [(5, 1, 2), (3, 2, 1), (2, 2, 0)] where h + 2 * padding >= kernel && w + 2 * padding >= kernel {
                let reference = Reference.maxPool2d(x, kernel: kernel, stride: stride, padding: padding)
                for t in [1, 2, 3] {
                    let y = withThreads(t) { maxPool2d(x, kernel: kernel, stride: stride, padding: padding) }
                    XCTAssertEqual(y, reference, "maxPool \(x.shape) k\(kernel) s\(stride) p\(padding), \(t) threads")
                }
            }
        }
        let logits = randomTensor([3, 130, 127], seed: 9, range: -8...8)
        let one = withThreads(1) { softmax(logits) }
        assertClose(one, Reference.softmax(logits), tolerance: tolerance(reduction: 127), "softmax, 1 thread")
        for t in [2, 3] {
            XCTAssertEqual(withThreads(t) { softmax(logits) }, one, "softmax, \(t) threads")
        }
    }

    /// Callers on several threads at once: each call runs (serially when the pool is busy) and is right.
    func testConcurrentCallers() {
        let x = randomTensor([1, 7, 127, 13], seed: 3), weight = randomTensor([13, 7, 3, 3], seed: 4)
        let p = Conv2DParameters(kernel: 3, stride: 1, padding: 1)
        let expected = conv2d(x, weight: weight, bias: nil, p)
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            for _ in 0..<20 {
                let y = conv2d(x, weight: weight, bias: nil, p)
                XCTAssertEqual(y, expected)
            }
        }
    }

    /// The fused residual equals a separate add, bit for bit, on every path and thread count.
    func testResidualEqualsSeparateAdd() {
        var seed: UInt64 = 900
        let cases = [(13, 7, 13, 127, 1, 1, 0, 1), (3, 7, 127, 13, 3, 2, 1, 1), (7, 13, 7, 13, 3, 1, 1, 1),
                     (13, 13, 1, 127, 3, 1, 1, 13), (6, 4, 13, 7, 3, 1, 1, 2), (1, 1, 1, 1, 1, 1, 0, 1),
                     (7, 13, 5, 32, 3, 1, 1, 1), (32, 13, 5, 32, 3, 1, 1, 1), (33, 7, 7, 13, 3, 1, 1, 1),
                     (7, 7, 7, 13, 3, 1, 1, 7), (13, 13, 9, 37, 3, 2, 1, 13)]
        for (cin, cout, h, w, k, s, pad, g) in cases {
            let p = Conv2DParameters(kernel: k, stride: s, padding: pad, groups: g)
            let x = randomTensor([1, cin, h, w], seed: seed), weight = randomTensor([cout, cin / g, k, k], seed: seed &+ 1)
            let bias = randomTensor([cout], seed: seed &+ 2).scalars
            let (ho, wo) = p.outputSize(h: h, w: w)
            let r = randomTensor([1, cout, ho, wo], seed: seed &+ 3)
            seed += 4
            for t in [1, 2, 3] {
                let (fused, separate) = withThreads(t) {
                    (conv2d(x, weight: weight, bias: bias, p, activation: .silu, residual: r),
                     add(r, conv2d(x, weight: weight, bias: bias, p, activation: .silu)))
                }
                XCTAssertEqual(fused, separate, "residual cin \(cin) cout \(cout) \(h)×\(w) k\(k) s\(s) g\(g), \(t) threads")
                assertClose(fused, Reference.add(r, Reference.conv2d(x, weight: weight, bias: bias, p, activation: .silu)),
                            tolerance: tolerance(reduction: cin / g * k * k), "residual vs reference")
            }
        }
    }
}

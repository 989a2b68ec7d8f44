import Tensor
import TestSupport
import XCTest

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

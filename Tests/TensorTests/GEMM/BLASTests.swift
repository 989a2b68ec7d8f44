import Tensor
import TestSupport
import XCTest

final class BLASTests: XCTestCase {
    func testSgemmLeadingDimensionsAndBeta() {
        // C (7×13, ldc 16) = 2·A(7×127, lda 130)·B(127×13, ldb 13) + 0.5·C
        let a = randomTensor([7, 130], seed: 1), b = randomTensor([127, 13], seed: 2), c0 = randomTensor([7, 16], seed: 3)
        var c = c0.scalars
        a.scalars.withUnsafeBufferPointer { ap in
            b.scalars.withUnsafeBufferPointer { bp in
                c.withUnsafeMutableBufferPointer { cp in
                    BLAS.sgemm(m: 7, n: 13, k: 127, alpha: 2, a: ap.baseAddress!, lda: 130, b: bp.baseAddress!, ldb: 13,
                               beta: 0.5, c: cp.baseAddress!, ldc: 16)
                }
            }
        }
        for i in 0..<7 {
            for j in 0..<16 {
                var expected = Double(c0.scalars[i * 16 + j])
                if j < 13 {
                    var dot = 0.0
                    for t in 0..<127 { dot += Double(a.scalars[i * 130 + t]) * Double(b.scalars[t * 13 + j]) }
                    expected = 2 * dot + 0.5 * expected
                }
                XCTAssertEqual(c[i * 16 + j], Float(expected), accuracy: tolerance(reduction: 127), "C[\(i), \(j)]")
            }
        }
    }

    func testCoreSelection() {
        XCTAssertNoThrow(try BLAS.load())
        if CPU.hasAVX512Skylake && ProcessInfo.processInfo.environment["YOLO_BLAS_CORETYPE"] == nil {
            XCTAssertEqual(BLAS.coreName, "SkylakeX", "an AVX-512 CPU should get OpenBLAS's SkylakeX kernels")
        }
        XCTAssertFalse(BLAS.coreName.isEmpty)
    }
}

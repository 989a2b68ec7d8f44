import Tensor
import TestSupport
import XCTest

final class ColumnMaximaTests: XCTestCase {
    func testColumnMaxima() {
        // The last cases span several blocks of columns (split over the threads); values from a
        // set of four tie often.
        for (rows, columns, values) in [(1, 1, 0), (3, 17, 0), (80, 127, 0), (7, 16, 0), (5, 2100, 0), (9, 1041, 4),
                                        (80, 8400, 0)] {
            var g = SystemRandomNumberGenerator()
            let x = (0..<(rows * columns)).map { _ in
                values > 0 ? Float(Int.random(in: 0..<values, using: &g)) : Float.random(in: 0...1, using: &g)
            }
            var best = [Float](repeating: 0, count: columns), idx = [Int32](repeating: 0, count: columns)
            columnMaxima(x, rows: rows, columns: columns, &best, &idx)
            for j in 0..<columns {
                let column = (0..<rows).map { x[$0 * columns + j] }
                XCTAssertEqual(best[j], column.max()!, "\(rows)×\(columns): column \(j)")
                XCTAssertEqual(Int(idx[j]), column.firstIndex(of: column.max()!)!, "\(rows)×\(columns): column \(j)")
            }
        }
    }
}

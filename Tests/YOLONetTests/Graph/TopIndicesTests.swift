import TestSupport
import XCTest
import YOLONet

final class TopIndicesTests: XCTestCase {
    /// The partial selection must return exactly the prefix of the full sort, ties by lower index.
    func testMatchesFullSortWithTies() {
        var state: UInt64 = 7
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        for n in [1, 2, 3, 7, 13, 127, 1000, 8400] {
            for levels in [2, 5, 1 << 20] {
                let values = (0..<n).map { _ in Float(next() % UInt64(levels)) / Float(levels) }
                let sorted = values.indices.sorted { values[$0] > values[$1] || (values[$0] == values[$1] && $0 < $1) }
                for k in [0, 1, 2, 7, 300, n - 1, n, n + 5] where k >= 0 {
                    XCTAssertEqual(topIndices(values, k), Array(sorted.prefix(k)), "n \(n) levels \(levels) k \(k)")
                }
            }
        }
        let constant = [Float](repeating: 0.5, count: 500)
        XCTAssertEqual(topIndices(constant, 300), Array(0..<300))
        let ascending = (0..<500).map(Float.init)
        XCTAssertEqual(topIndices(ascending, 3), [499, 498, 497])
    }
}

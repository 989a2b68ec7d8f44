import Foundation
import TestSupport
import XCTest
import YOLOCore

/// The tracker's parts: the assignment solver, the Kalman filter, configuration files, track
/// lifecycle, IDs, JSON and drawing.
final class TrackerTests: XCTestCase {
    /// Total cost of an assignment in lap's extended problem: matched costs plus `limit / 2` for
    /// every unmatched row and column.
    private func extendedCost(_ cost: [Double], columns: Int, limit: Double, matches: [(row: Int, column: Int)],
                              unmatched: Int) -> Double {
        matches.reduce(0) { $0 + cost[$1.row * columns + $1.column] } + Double(unmatched) * limit / 2
    }

    /// The optimum of the extended problem by dynamic programming over the used columns' subsets.
    private func bruteForce(_ cost: [Double], rows: Int, columns: Int, limit: Double) -> Double {
        var best = [Double](repeating: .infinity, count: 1 << columns)
        best[0] = 0
        for r in 0..<rows {
            var next = best.map { $0 + limit / 2 }
            for mask in best.indices where best[mask].isFinite {
                for c in 0..<columns where mask & (1 << c) == 0 {
                    next[mask | (1 << c)] = min(next[mask | (1 << c)], best[mask] + cost[r * columns + c])
                }
            }
            best = next
        }
        return best.indices.map { best[$0] + Double(columns - $0.nonzeroBitCount) * limit / 2 }.min()!
    }

    private func checkConsistent(_ a: LinearAssignment, rows: Int, columns: Int, cost: [Double], limit: Double,
                                 _ message: String) {
        XCTAssertEqual(Set(a.matches.map(\.row)).count, a.matches.count, message)
        XCTAssertEqual(Set(a.matches.map(\.column)).count, a.matches.count, message)
        XCTAssertEqual(Set(a.matches.map(\.row)).union(a.unmatchedRows), Set(0..<rows), message)
        XCTAssertEqual(Set(a.matches.map(\.column)).union(a.unmatchedColumns), Set(0..<columns), message)
        // A pair at exactly the limit ties with leaving both unmatched; lap may match it.
        XCTAssertTrue(a.matches.allSatisfy { cost[$0.row * columns + $0.column] <= limit }, message)
    }

    /// Random matrices from 0×n and n×0 up to 9×9, continuous and with many ties, costs above the
    /// limit: the solver's total equals the brute-force optimum.
    func testAssignmentIsOptimal() {
        var generator = SeededGenerator(seed: 26)
        for trial in 0..<600 {
            let rows = Int.random(in: 0...9, using: &generator), columns = Int.random(in: 0...9, using: &generator)
            let ties = trial % 2 == 1
            let cost = (0..<rows * columns).map { _ in
                ties ? Double(Int.random(in: 0...10, using: &generator)) / 10 : Double.random(in: 0...1.2, using: &generator)
            }
            let limit = [0.3, 0.5, 0.8, 1.0][trial % 4]
            let a = linearAssignment(cost, rows: rows, columns: columns, costLimit: limit)
            let message = "\(rows)×\(columns) limit \(limit): \(cost)"
            checkConsistent(a, rows: rows, columns: columns, cost: cost, limit: limit, message)
            let total = extendedCost(cost, columns: columns, limit: limit, matches: a.matches,
                                     unmatched: a.unmatchedRows.count + a.unmatchedColumns.count)
            XCTAssertEqual(total, bruteForce(cost, rows: rows, columns: columns, limit: limit), accuracy: 1e-9, message)
        }
        let empty = linearAssignment([], rows: 0, columns: 3, costLimit: 0.8)
        XCTAssertEqual(empty, LinearAssignment(matches: [], unmatchedRows: [], unmatchedColumns: [0, 1, 2]))
        XCTAssertEqual(linearAssignment([], rows: 2, columns: 0, costLimit: 0.8),
                       LinearAssignment(matches: [], unmatchedRows: [0, 1], unmatchedColumns: []))
        // Non-finite costs never match; a pair at exactly the limit does, as with lap.
        XCTAssertEqual(linearAssignment([.nan, .infinity, 0.3, 0.2], rows: 2, columns: 2, costLimit: 0.8),
                       LinearAssignment(matches: [(1, 1)], unmatchedRows: [0], unmatchedColumns: [0]))
        XCTAssertEqual(linearAssignment([0.8], rows: 1, columns: 1, costLimit: 0.8),
                       LinearAssignment(matches: [(0, 0)], unmatchedRows: [], unmatchedColumns: []))
    }

    /// Against lap 0.5.13, ties included (the odd cases): the same assignment. Each case is
    /// rows, columns, limit, costs, and lap's column per row, made by the Python below.
    func testAssignmentAgreesWithLap() {
        // import numpy as np, lap; rng = np.random.default_rng(26)
        // for case in range(40):
        //     r, c = int(rng.integers(1, 10)), int(rng.integers(1, 10)); ties = case % 2 == 1
        //     m = (rng.integers(0, 11, (r, c)) / 10) if ties else rng.random((r, c)).round(4)
        //     limit = float(rng.choice([0.3, 0.5, 0.7, 0.8, 1.0]))
        //     _, x, y = lap.lapjv(m, extend_cost=True, cost_limit=limit)
        let cases: [(Int, Int, Double, [Double], [Int])] = [
        (8, 5, 0.3, [0.2344, 0.0676, 0.7129, 0.8131, 0.5483, 0.6343, 0.1692, 0.5543, 0.1758, 0.5066, 0.342, 0.9624, 0.5198, 0.2024, 0.2573, 0.5504, 0.8482, 0.3372, 0.9044, 0.2403, 0.9173, 0.729, 0.932, 0.9507, 0.1601, 0.7021, 0.2398, 0.6138, 0.2555, 0.461, 0.3927, 0.0649, 0.6263, 0.6759, 0.8794, 0.713, 0.1912, 0.6202, 0.4701, 0.2842], [0, 3, -1, -1, 4, -1, 1, -1]),
        (1, 9, 0.7, [0.0, 1.0, 0.8, 0.1, 0.3, 1.0, 0.3, 0.8, 0.8], [0]),
        (7, 2, 0.5, [0.7397, 0.6832, 0.4854, 0.5597, 0.9271, 0.5962, 0.9965, 0.6174, 0.5104, 0.254, 0.5133, 0.836, 0.0018, 0.2181], [-1, -1, -1, -1, 1, -1, 0]),
        (5, 9, 0.5, [0.3, 0.4, 0.4, 0.9, 0.2, 0.3, 0.5, 0.8, 0.2, 0.7, 0.1, 0.2, 0.8, 0.0, 0.4, 0.2, 0.5, 0.5, 0.8, 0.9, 0.3, 0.2, 0.9, 0.3, 0.3, 0.8, 0.3, 0.0, 0.9, 0.7, 0.5, 1.0, 0.7, 0.7, 0.9, 0.6, 0.0, 0.0, 0.0, 0.5, 0.5, 0.2, 0.1, 0.9, 0.1], [8, 4, 3, 0, 2]),
        (2, 3, 0.3, [0.3358, 0.7763, 0.3954, 0.6255, 0.3137, 0.2938], [-1, 2]),
        (8, 9, 0.3, [1.0, 0.2, 1.0, 0.1, 0.3, 0.9, 0.1, 0.7, 0.2, 0.8, 0.1, 0.6, 1.0, 0.5, 0.9, 0.8, 0.2, 0.6, 0.7, 0.4, 0.3, 0.7, 0.5, 0.6, 0.3, 0.2, 0.0, 0.4, 0.2, 0.2, 0.0, 0.8, 0.0, 0.5, 0.3, 0.9, 0.4, 0.1, 0.6, 0.6, 0.3, 0.3, 0.9, 1.0, 0.7, 0.6, 0.9, 0.1, 0.5, 0.4, 0.6, 0.7, 0.4, 0.8, 0.8, 0.8, 1.0, 0.6, 0.3, 0.2, 0.3, 0.5, 0.9, 0.0, 0.6, 1.0, 0.4, 0.5, 0.3, 0.3, 0.9, 0.0], [6, 7, 8, 3, 1, 2, 5, 0]),
        (7, 9, 1.0, [0.2922, 0.6072, 0.3693, 0.941, 0.9958, 0.8993, 0.3443, 0.253, 0.024, 0.1662, 0.6475, 0.2874, 0.4458, 0.7283, 0.8629, 0.4837, 0.9487, 0.0599, 0.4741, 0.9147, 0.1657, 0.9415, 0.3822, 0.1978, 0.0208, 0.9368, 0.5207, 0.1365, 0.9123, 0.1994, 0.4996, 0.9782, 0.9113, 0.9592, 0.2841, 0.4106, 0.677, 0.5347, 0.8346, 0.9961, 0.0603, 0.3835, 0.5797, 0.7122, 0.803, 0.9579, 0.9321, 0.7725, 0.2422, 0.6355, 0.775, 0.1562, 0.2615, 0.4509, 0.476, 0.191, 0.1135, 0.3052, 0.9221, 0.9201, 0.6308, 0.8419, 0.0536], [7, 8, 6, 0, 4, 3, 2]),
        (4, 7, 0.8, [0.1, 0.4, 0.3, 1.0, 0.9, 0.3, 0.5, 0.4, 0.4, 0.0, 0.6, 0.4, 0.2, 0.4, 0.2, 0.8, 0.2, 0.9, 0.0, 0.5, 0.4, 1.0, 0.5, 0.2, 0.5, 0.7, 0.4, 0.8], [0, 5, 4, 2]),
        (7, 2, 1.0, [0.5312, 0.2856, 0.178, 0.1671, 0.6832, 0.5383, 0.5749, 0.0505, 0.6979, 0.6037, 0.6916, 0.219, 0.7967, 0.4643], [-1, 0, -1, 1, -1, -1, -1]),
        (1, 2, 0.3, [0.2, 0.7], [0]),
        (4, 1, 0.3, [0.3192, 0.2544, 0.9974, 0.2835], [-1, 0, -1, -1]),
        (7, 4, 1.0, [0.3, 0.1, 0.6, 0.8, 1.0, 0.3, 0.5, 1.0, 1.0, 0.9, 0.2, 0.6, 0.9, 0.5, 0.8, 0.9, 0.8, 0.2, 0.5, 0.6, 0.8, 0.2, 0.9, 0.4, 0.2, 0.8, 0.5, 0.9], [1, -1, 2, -1, -1, 3, 0]),
        (5, 1, 0.7, [0.0381, 0.4231, 0.7367, 0.151, 0.4427], [0, -1, -1, -1, -1]),
        (7, 1, 0.5, [0.4, 1.0, 0.1, 0.0, 0.8, 0.8, 0.1], [-1, -1, -1, 0, -1, -1, -1]),
        (7, 4, 1.0, [0.7596, 0.5944, 0.7397, 0.131, 0.4444, 0.3722, 0.9793, 0.6397, 0.9902, 0.1547, 0.984, 0.519, 0.8368, 0.9726, 0.5221, 0.0718, 0.4702, 0.1215, 0.097, 0.1603, 0.4164, 0.7414, 0.9634, 0.505, 0.9875, 0.5023, 0.964, 0.5318], [-1, -1, 1, 3, 2, 0, -1]),
        (7, 8, 0.7, [0.2, 0.8, 0.5, 0.7, 0.6, 0.6, 0.5, 0.5, 0.0, 0.9, 0.7, 0.3, 0.9, 0.4, 1.0, 0.8, 0.1, 0.8, 0.4, 0.8, 0.6, 1.0, 0.6, 0.1, 0.1, 0.3, 0.0, 0.9, 0.9, 0.4, 1.0, 0.5, 0.3, 0.9, 0.9, 0.2, 0.7, 0.1, 0.2, 0.6, 1.0, 0.3, 0.3, 1.0, 0.3, 0.8, 0.2, 0.7, 0.8, 0.8, 0.9, 0.0, 0.1, 0.6, 0.2, 0.4], [6, 0, 7, 2, 5, 1, 3]),
        (6, 6, 0.3, [0.7371, 0.4253, 0.6137, 0.3759, 0.3813, 0.0455, 0.2847, 0.9478, 0.512, 0.2508, 0.5741, 0.5273, 0.2496, 0.9307, 0.9745, 0.7253, 0.0136, 0.8943, 0.9773, 0.6799, 0.5076, 0.5141, 0.0537, 0.6169, 0.0428, 0.6367, 0.5339, 0.6165, 0.9483, 0.0737, 0.2278, 0.8237, 0.7178, 0.919, 0.2523, 0.4374], [5, 3, 4, -1, 0, -1]),
        (7, 5, 0.7, [0.7, 0.2, 0.2, 0.3, 0.4, 1.0, 0.3, 0.7, 0.2, 0.2, 0.9, 0.4, 0.8, 0.3, 0.3, 0.8, 0.6, 0.6, 0.0, 0.2, 1.0, 0.5, 0.7, 0.7, 0.3, 1.0, 0.4, 0.8, 0.7, 0.4, 0.9, 0.4, 1.0, 1.0, 0.0], [2, 1, -1, 3, -1, -1, 4]),
        (5, 3, 0.5, [0.8688, 0.5567, 0.1945, 0.8028, 0.3027, 0.3319, 0.5517, 0.3444, 0.89, 0.3179, 0.197, 0.581, 0.6447, 0.3511, 0.5557], [2, 1, -1, 0, -1]),
        (1, 2, 0.3, [0.5, 0.6], [-1]),
        (2, 9, 0.8, [0.507, 0.9949, 0.3147, 0.7307, 0.2116, 0.1738, 0.1942, 0.669, 0.8128, 0.1962, 0.2452, 0.3857, 0.4565, 0.9086, 0.9049, 0.4385, 0.7999, 0.8973], [5, 0]),
        (7, 9, 0.8, [0.3, 0.9, 1.0, 0.5, 0.1, 1.0, 0.2, 0.4, 1.0, 0.8, 0.8, 0.6, 0.5, 0.3, 0.0, 1.0, 0.6, 0.5, 1.0, 0.1, 0.2, 0.5, 0.6, 0.7, 0.0, 0.7, 0.2, 0.2, 0.0, 0.6, 0.6, 0.2, 0.5, 0.3, 0.3, 0.4, 0.5, 0.3, 0.6, 0.4, 0.3, 0.8, 0.4, 0.1, 0.7, 0.0, 0.1, 0.3, 0.6, 1.0, 0.2, 0.5, 0.1, 0.1, 0.9, 0.5, 0.7, 0.7, 0.0, 0.4, 0.7, 0.9, 0.9], [0, 5, 6, 1, 7, 8, 4]),
        (3, 9, 1.0, [0.5499, 0.9201, 0.5237, 0.81, 0.7496, 0.4602, 0.0967, 0.1767, 0.9389, 0.9401, 0.686, 0.2878, 0.0882, 0.8115, 0.0291, 0.0465, 0.9492, 0.6332, 0.7427, 0.0435, 0.1828, 0.7077, 0.8226, 0.031, 0.8893, 0.3448, 0.9384], [6, 5, 1]),
        (3, 8, 0.7, [0.9, 0.9, 0.7, 0.2, 0.2, 0.2, 0.3, 0.0, 0.8, 0.6, 0.5, 0.0, 0.7, 0.8, 0.9, 0.3, 0.6, 0.8, 0.7, 0.7, 0.2, 0.7, 1.0, 0.1], [7, 3, 4]),
        (5, 2, 0.7, [0.1046, 0.2982, 0.4054, 0.9426, 0.9142, 0.2973, 0.6585, 0.2278, 0.2873, 0.1061], [0, -1, -1, -1, 1]),
        (4, 3, 0.3, [1.0, 0.2, 0.4, 0.0, 0.1, 0.1, 0.5, 0.1, 0.5, 0.9, 0.4, 0.1], [-1, 0, 1, 2]),
        (4, 5, 1.0, [0.0337, 0.8992, 0.5213, 0.5946, 0.2784, 0.9251, 0.6355, 0.0932, 0.0084, 0.2505, 0.1838, 0.5583, 0.6071, 0.2649, 0.6457, 0.0904, 0.1896, 0.2579, 0.4186, 0.1426], [0, 2, 3, 4]),
        (5, 9, 0.8, [0.5, 0.4, 0.4, 0.1, 0.2, 0.3, 0.8, 0.6, 0.9, 1.0, 1.0, 1.0, 0.4, 0.4, 0.0, 0.9, 0.6, 0.6, 1.0, 0.1, 0.7, 0.7, 0.5, 0.5, 0.9, 0.9, 0.3, 0.0, 0.3, 1.0, 0.5, 0.9, 0.1, 1.0, 0.4, 0.5, 1.0, 0.4, 0.2, 0.9, 0.4, 0.6, 0.6, 0.4, 1.0], [3, 5, 1, 0, 2]),
        (4, 3, 0.3, [0.5317, 0.9194, 0.7486, 0.1514, 0.4672, 0.9541, 0.4344, 0.2747, 0.2076, 0.4046, 0.4814, 0.0467], [-1, 0, 1, 2]),
        (8, 4, 1.0, [0.5, 0.5, 1.0, 1.0, 0.6, 0.7, 0.1, 0.8, 0.2, 1.0, 0.9, 0.7, 0.4, 0.5, 0.4, 1.0, 0.2, 0.9, 1.0, 0.1, 0.2, 0.3, 0.5, 0.0, 0.6, 1.0, 0.2, 0.9, 1.0, 0.7, 0.7, 1.0], [-1, 2, 0, -1, 3, 1, -1, -1]),
        (2, 5, 0.7, [0.3467, 0.4528, 0.5067, 0.8065, 0.1384, 0.6237, 0.2512, 0.2882, 0.6055, 0.1741], [4, 1]),
        (1, 6, 0.7, [0.9, 1.0, 0.9, 0.1, 0.8, 0.0], [5]),
        (4, 6, 0.8, [0.8321, 0.7401, 0.6327, 0.3001, 0.4195, 0.8715, 0.9415, 0.2882, 0.149, 0.4184, 0.5913, 0.6052, 0.4882, 0.1534, 0.1163, 0.8037, 0.976, 0.2003, 0.742, 0.6573, 0.9691, 0.1959, 0.7507, 0.905], [4, 2, 1, 3]),
        (6, 4, 0.7, [0.4, 0.1, 0.8, 0.4, 1.0, 0.5, 0.8, 0.8, 0.2, 0.2, 0.4, 0.3, 0.3, 0.7, 0.9, 0.1, 0.0, 0.6, 0.9, 0.4, 0.6, 0.9, 0.1, 0.9], [1, -1, -1, 3, 0, 2]),
        (7, 5, 0.7, [0.5023, 0.0768, 0.5767, 0.022, 0.4745, 0.7863, 0.84, 0.8763, 0.0587, 0.2463, 0.7199, 0.4349, 0.5731, 0.0952, 0.6234, 0.5074, 0.3461, 0.0604, 0.222, 0.5756, 0.3419, 0.8642, 0.0265, 0.7073, 0.3879, 0.2582, 0.1389, 0.1442, 0.1901, 0.081, 0.4074, 0.0055, 0.8635, 0.0376, 0.7061], [3, -1, -1, 2, 0, 4, 1]),
        (5, 3, 0.3, [0.0, 0.7, 0.2, 0.1, 0.7, 0.8, 0.3, 0.2, 0.8, 0.9, 0.1, 0.3, 0.8, 0.3, 0.8], [0, -1, -1, 1, -1]),
        (6, 8, 0.3, [0.539, 0.6428, 0.6642, 0.6606, 0.7834, 0.4909, 0.304, 0.8556, 0.5044, 0.3664, 0.3172, 0.1703, 0.1545, 0.6968, 0.8815, 0.3542, 0.3979, 0.0844, 0.5134, 0.0073, 0.224, 0.4184, 0.4203, 0.6116, 0.931, 0.1658, 0.4981, 0.3451, 0.6232, 0.5411, 0.5997, 0.6218, 0.3952, 0.987, 0.7652, 0.2208, 0.6682, 0.664, 0.3004, 0.6759, 0.7708, 0.2606, 0.4458, 0.1422, 0.7389, 0.9219, 0.376, 0.2297], [-1, 4, 3, 1, -1, 7]),
        (8, 3, 0.8, [0.8, 0.0, 0.5, 0.9, 1.0, 1.0, 0.7, 0.9, 0.1, 0.3, 0.8, 0.8, 0.5, 0.8, 0.0, 0.2, 1.0, 0.5, 0.6, 0.8, 0.5, 0.7, 1.0, 0.0], [1, -1, -1, -1, -1, 0, -1, 2]),
        (6, 6, 0.8, [0.0807, 0.51, 0.1091, 0.6821, 0.3382, 0.0448, 0.9656, 0.2413, 0.0665, 0.0193, 0.7742, 0.6035, 0.2021, 0.734, 0.4349, 0.5764, 0.4707, 0.4925, 0.591, 0.9363, 0.3273, 0.4609, 0.1477, 0.9065, 0.6765, 0.8321, 0.7335, 0.226, 0.2306, 0.9743, 0.1403, 0.5016, 0.3558, 0.3808, 0.8529, 0.0894], [2, 1, 0, 4, 3, 5]),
        (4, 5, 0.5, [0.9, 1.0, 1.0, 1.0, 0.3, 0.9, 0.9, 0.6, 0.7, 0.8, 0.9, 1.0, 0.2, 0.8, 0.2, 0.2, 0.7, 0.5, 0.8, 0.2], [4, -1, 2, 0]),
        ]
        for (i, (rows, columns, limit, cost, expected)) in cases.enumerated() {
            let a = linearAssignment(cost, rows: rows, columns: columns, costLimit: limit)
            var columnOfRow = [Int](repeating: -1, count: rows)
            for m in a.matches { columnOfRow[m.row] = m.column }
            let lapMatches = expected.enumerated().filter { $0.element >= 0 }.map { (row: $0.offset, column: $0.element) }
            let lapTotal = extendedCost(cost, columns: columns, limit: limit, matches: lapMatches,
                                        unmatched: rows + columns - 2 * lapMatches.count)
            let total = extendedCost(cost, columns: columns, limit: limit, matches: a.matches,
                                     unmatched: a.unmatchedRows.count + a.unmatchedColumns.count)
            XCTAssertEqual(total, lapTotal, accuracy: 1e-9, "case \(i)")
            XCTAssertEqual(columnOfRow, expected, "case \(i)")
        }
    }

    /// Predict, update, predict against Ultralytics' `KalmanFilterXYAH` / `KalmanFilterXYWH` in
    /// NumPy, made with `from ultralytics.trackers.utils.kalman_filter import KalmanFilterXYAH`
    /// (and XYWH): `initiate([100.5, 200.25, 0.5 or 40, 80])`, `multi_predict`,
    /// `update(…, [104, 203.5, 0.52 or 42, 82])`, `multi_predict`, values printed with `repr`.
    func testKalmanFilterMatchesNumPy() {
        let expected: [(KalmanFilter.Form, [Double], [Double], [Double], [Double])] = [
            (.xyah, [100.5, 200.25, 0.5, 80], [104, 203.5, 0.52, 82],
             [104.2603305785124, 203.7417355371901, 0.5003921572510572, 82.14876033057851, 0.7231404958677686,
              0.6714876033057852, 1.9607842945021166e-10, 0.4132231404958678],
             [57.282323611775155, 23.390495867768593, 57.282323611775155, 23.390495867768593, 0.0002960789235678547,
              2.9803921374471367e-10, 57.282323611775155, 23.390495867768593, 20.34567551097944, 20.34567551097944,
              2.999999990196079e-10, 20.34567551097944]),
            (.xywh, [100.5, 200.25, 40, 80], [104, 203.5, 42, 82],
             [104.2603305785124, 203.7417355371901, 42.14876033057851, 82.14876033057851, 0.7231404958677686,
              0.6714876033057852, 0.4132231404958678, 0.4132231404958678],
             [14.499782289461104, 5.847623966942148, 57.282323611775155, 23.390495867768593, 14.499782289461104,
              5.847623966942148, 57.282323611775155, 23.390495867768593, 5.089218899409193, 20.34567551097944,
              5.089218899409193, 20.34567551097944]),
        ]
        for (form, first, second, mean, covariance) in expected {
            let filter = KalmanFilter(form)
            let state = filter.predict(filter.update(filter.predict(filter.initiate(SIMD4(first))), measurement: SIMD4(second)))
            for k in 0..<8 { XCTAssertEqual(state.mean[k], mean[k], accuracy: abs(mean[k]) * 1e-9, "\(form) mean \(k)") }
            // The covariance couples each value only with its velocity: `covariance` lists
            // P[k, k], P[k, k + 4] for k < 4, then P[k + 4, k + 4].
            for r in 0..<8 {
                for c in 0..<8 where c != r && abs(c - r) != 4 {
                    XCTAssertEqual(state.covariance[r * 8 + c], 0, "\(form) P[\(r), \(c)]")
                }
            }
            for k in 0..<4 {
                for (index, value) in [(k * 9, covariance[2 * k]), (k * 8 + k + 4, covariance[2 * k + 1]),
                                       ((k + 4) * 8 + k, covariance[2 * k + 1]), ((k + 4) * 9, covariance[8 + k])] {
                    XCTAssertEqual(state.covariance[index], value, accuracy: value * 1e-9, "\(form) P[\(index / 8), \(index % 8)]")
                }
            }
        }
    }

    private let bytetrackYAML = """
        tracker_type: bytetrack # (str) Tracker backend
        track_high_thresh: 0.25
        track_low_thresh: 0.1
        new_track_thresh: 0.25
        track_buffer: 30
        match_thresh: 0.8
        fuse_score: True
        """


    /// Ultralytics 8.4.190's tracker YAML files as shipped (comments dropped).
    private let shippedYAML: [String: String] = [
        "tracktrack": """
        tracker_type: tracktrack
        track_high_thresh: 0.6
        track_low_thresh: 0.25
        new_track_thresh: 0.7
        track_buffer: 30
        match_thresh: 0.7
        lost_match_thr: 0.0
        iou_weight: 0.5
        reid_weight: 0.5
        conf_weight: 0.1
        angle_weight: 0.05
        penalty_p: 0.2
        penalty_q: 0.4
        reduce_step: 0.05
        tai_thr: 0.55
        min_track_len: 3
        gmc_method: sparseOptFlow
        with_reid: False
        model: auto
        """,
        "ocsort": """
        tracker_type: ocsort
        track_high_thresh: 0.25
        track_low_thresh: 0.1
        new_track_thresh: 0.25
        track_buffer: 30
        match_thresh: 0.8
        fuse_score: True
        delta_t: 3
        inertia: 0.2
        use_byte: False
        """,
        "fasttrack": """
        tracker_type: fasttrack
        track_high_thresh: 0.25
        track_low_thresh: 0.1
        new_track_thresh: 0.25
        track_buffer: 30
        match_thresh: 0.8
        fuse_score: True
        reset_velocity_offset_occ: 5
        reset_pos_offset_occ: 3
        enlarge_bbox_occ: 1.1
        dampen_motion_occ: 0.5
        active_occ_to_lost_thresh: 10
        occ_cover_thresh: 0.7
        occ_reappear_window: 40
        init_iou_suppress: 0.7
        """,
        "deepocsort": """
        tracker_type: deepocsort
        track_high_thresh: 0.3
        track_low_thresh: 0.1
        new_track_thresh: 0.3
        track_buffer: 30
        match_thresh: 0.8
        fuse_score: True
        delta_t: 3
        inertia: 0.2
        use_byte: False
        gmc_method: none
        with_reid: False
        model: auto
        proximity_thresh: 0.5
        appearance_thresh: 0.9
        alpha_fixed_emb: 0.95
        """,
    ]

    func testConfigurationFiles() throws {
        XCTAssertEqual(try TrackerConfiguration(yaml: bytetrackYAML), .bytetrack)
        XCTAssertEqual(try TrackerConfiguration(named: "bytetrack"), .bytetrack)
        XCTAssertEqual(try TrackerConfiguration(named: "botsort.yaml"), .botsort)
        let nogmc = try sharedFile("trackers/botsort-nogmc.yaml").path
        XCTAssertEqual(try TrackerConfiguration(named: nogmc), .botsort)
        var custom = TrackerConfiguration.bytetrack
        custom.trackBuffer = 60
        custom.matchThreshold = 1
        custom.fuseScore = false
        XCTAssertEqual(try TrackerConfiguration(yaml: bytetrackYAML.replacingOccurrences(of: "30", with: "60")
            .replacingOccurrences(of: "0.8", with: "1").replacingOccurrences(of: "True", with: "false")), custom)
        // Ultralytics' other files give the built-in defaults, by text and by name.
        for (name, text) in shippedYAML {
            let expected = try TrackerConfiguration(named: name)
            XCTAssertEqual(try TrackerConfiguration(yaml: text), expected, name)
            XCTAssertEqual(expected.algorithm.rawValue, name)
            XCTAssertEqual(try TrackerConfiguration(named: name + ".yaml"), expected)
        }
        XCTAssertEqual(TrackerConfiguration.tracktrack.cameraMotion, .sparseOptFlow)
        XCTAssertEqual(TrackerConfiguration.tracktrack.trackHighThreshold, 0.6)
        XCTAssertEqual(TrackerConfiguration.deepocsort.appearanceThreshold, 0.9)
        // Every key is read: a changed value shows in the configuration.
        var tracktrack = TrackerConfiguration.tracktrack
        (tracktrack.minTrackLength, tracktrack.initializationIoU, tracktrack.cameraMotion) = (2, 0.5, .none)
        XCTAssertEqual(try TrackerConfiguration(yaml: shippedYAML["tracktrack"]!.replacingOccurrences(of: "min_track_len: 3", with: "min_track_len: 2")
            .replacingOccurrences(of: "tai_thr: 0.55", with: "tai_thr: 0.5").replacingOccurrences(of: "sparseOptFlow", with: "none")), tracktrack)
        var fasttrack = TrackerConfiguration.fasttrack
        (fasttrack.occlusionEnlargement, fasttrack.occlusionReappearWindow) = (1.3, 20)
        XCTAssertEqual(try TrackerConfiguration(yaml: shippedYAML["fasttrack"]!.replacingOccurrences(of: "enlarge_bbox_occ: 1.1", with: "enlarge_bbox_occ: 1.3")
            .replacingOccurrences(of: "occ_reappear_window: 40", with: "occ_reappear_window: 20")), fasttrack)
        var ocsort = TrackerConfiguration.ocsort
        (ocsort.deltaT, ocsort.inertia, ocsort.useByte) = (5, 0.3, true)
        XCTAssertEqual(try TrackerConfiguration(yaml: shippedYAML["ocsort"]!.replacingOccurrences(of: "delta_t: 3", with: "delta_t: 5")
            .replacingOccurrences(of: "inertia: 0.2", with: "inertia: 0.3").replacingOccurrences(of: "use_byte: False", with: "use_byte: True")), ocsort)
    }

    /// Unknown keys, wrong types, values out of range, missing keys and settings not supported
    /// yet: typed errors naming the key and the value.
    func testConfigurationErrors() throws {
        typealias E = TrackerConfigurationError
        let source = "tracker YAML"
        let botsort = bytetrackYAML.replacingOccurrences(of: "bytetrack", with: "botsort") + """

            gmc_method: sparseOptFlow
            proximity_thresh: 0.5
            appearance_thresh: 0.8
            with_reid: False
            model: auto
            """
        let cases: [(String, E)] = [
            (bytetrackYAML + "\nproximity_thresh: 0.5", .unknownKey(source: source, key: "proximity_thresh", tracker: "bytetrack")),
            (bytetrackYAML + "\ntrack_bufer: 3", .unknownKey(source: source, key: "track_bufer", tracker: "bytetrack")),
            (bytetrackYAML.replacingOccurrences(of: "30", with: "thirty"),
             .wrongType(source: source, key: "track_buffer", value: "thirty", expected: "a whole number of frames")),
            (bytetrackYAML.replacingOccurrences(of: "30", with: "30.5"),
             .wrongType(source: source, key: "track_buffer", value: "30.5", expected: "a whole number of frames")),
            (bytetrackYAML.replacingOccurrences(of: "True", with: "1"),
             .wrongType(source: source, key: "fuse_score", value: "1", expected: "true or false")),
            (bytetrackYAML.replacingOccurrences(of: "0.8", with: "high"),
             .wrongType(source: source, key: "match_thresh", value: "high", expected: "a number")),
            (bytetrackYAML.replacingOccurrences(of: "0.8", with: "1.5"),
             .outOfRange(source: source, key: "match_thresh", value: "1.5", allowed: "0…1")),
            (bytetrackYAML.replacingOccurrences(of: "30", with: "-1"),
             .outOfRange(source: source, key: "track_buffer", value: "-1", allowed: "0 or more frames")),
            (bytetrackYAML.replacingOccurrences(of: "track_low_thresh: 0.1\n", with: ""),
             .missingKey(source: source, key: "track_low_thresh")),
            (bytetrackYAML.replacingOccurrences(of: "bytetrack", with: "strongsort"),
             .notSupported(source: source, key: "tracker_type", value: "strongsort",
                           reason: "not a tracker: use bytetrack, botsort, tracktrack, ocsort, fasttrack, deepocsort, spatial")),
            (bytetrackYAML.replacingOccurrences(of: "bytetrack", with: "ocsort"), .missingKey(source: source, key: "delta_t")),
            (shippedYAML["tracktrack"]!.replacingOccurrences(of: "sparseOptFlow", with: "orb"),
             .notSupported(source: source, key: "gmc_method", value: "orb", reason: "only sparseOptFlow and none are supported yet")),
            (shippedYAML["deepocsort"]!.replacingOccurrences(of: "gmc_method: none", with: "gmc_method: sparseOptFlow"),
             .notSupported(source: source, key: "gmc_method", value: "sparseOptFlow",
                           reason: "camera-motion compensation is not supported yet; use none")),
            (shippedYAML["fasttrack"]!.replacingOccurrences(of: "enlarge_bbox_occ: 1.1", with: "enlarge_bbox_occ: 0.9"),
             .outOfRange(source: source, key: "enlarge_bbox_occ", value: "0.9", allowed: "1 or more")),
            (shippedYAML["tracktrack"]! + "\nfuse_score: True", .unknownKey(source: source, key: "fuse_score", tracker: "tracktrack")),
            (botsort, .notSupported(source: source, key: "gmc_method", value: "sparseOptFlow",
                                    reason: "camera-motion compensation is not supported yet; use none")),
            (botsort.replacingOccurrences(of: "sparseOptFlow", with: "none").replacingOccurrences(of: "False", with: "True"),
             .notSupported(source: source, key: "with_reid", value: "true", reason: "ReID is not supported yet; use false")),
        ]
        for (text, expected) in cases {
            XCTAssertThrowsError(try TrackerConfiguration(yaml: text)) { error in
                XCTAssertEqual(error as? E, expected)
                XCTAssertFalse(error.localizedDescription.isEmpty)
            }
        }
        XCTAssertEqual(try TrackerConfiguration(yaml: botsort.replacingOccurrences(of: "sparseOptFlow", with: "none")), .botsort)
        XCTAssertThrowsError(try TrackerConfiguration(yaml: "- a list")) { XCTAssertNotNil($0 as? E) }
        XCTAssertThrowsError(try TrackerConfiguration(yaml: "key: [unclosed")) { XCTAssertNotNil($0 as? E) }
        XCTAssertThrowsError(try TrackerConfiguration(named: "/nonexistent/tracker.yaml")) { error in
            guard case .unreadable(source: "/nonexistent/tracker.yaml", _)? = error as? E else { return XCTFail("\(error)") }
        }
        // A file that never ends is refused after its first MiB, as a data YAML is.
        XCTAssertThrowsError(try TrackerConfiguration(named: "/dev/zero")) { error in
            XCTAssertEqual(error as? E, .unreadable(source: "/dev/zero", reason: "larger than \(Dataset.maxYAMLBytes) bytes"))
        }
        let message = E.outOfRange(source: "t.yaml", key: "match_thresh", value: "1.5", allowed: "0…1").localizedDescription
        XCTAssertEqual(message, "tracker configuration t.yaml: match_thresh = 1.5 is out of range: must be 0…1")
    }

    private func box(_ x1: Float, _ y1: Float, _ x2: Float, _ y2: Float, conf: Float = 0.9) -> Box {
        Box(xyxy: [x1, y1, x2, y2], conf: conf, cls: 0, name: "person", originalShape: [480, 640])
    }

    /// `expireAfter` at 10 fps: a track unmatched since frame 10 (0.9 s) goes in frame 26, the
    /// first more than 1.5 s later, in every engine; without frame times, or without the
    /// setting, only the frame limit removes it (ByteTrack, TrackTrack: 30 frames; spatial: 90).
    func testTimeBasedExpiry() {
        let a = box(100, 100, 200, 300)
        for algorithm in [TrackerConfiguration.Algorithm.bytetrack, .tracktrack, .ocsort, .spatial] {
            func removalFrame(expireAfter: Double?, timed: Bool) -> Int? {
                var configuration = TrackerConfiguration(algorithm: algorithm)
                configuration.expireAfter = expireAfter
                var tracker = ObjectTracker(configuration)
                for frame in 1...120 {
                    _ = tracker.update(frame <= 10 ? [a] : [], time: timed ? Double(frame - 1) / 10 : nil)
                    if tracker.removedTracks.contains(where: { $0.id == 1 }) { return frame }
                }
                return nil
            }
            let frameLimit = algorithm == .spatial ? 100 : 41
            XCTAssertEqual(removalFrame(expireAfter: 1.5, timed: true), 26, "\(algorithm)")
            XCTAssertEqual(removalFrame(expireAfter: nil, timed: true), frameLimit, "\(algorithm)")
            XCTAssertEqual(removalFrame(expireAfter: 1.5, timed: false), frameLimit, "\(algorithm)")
            XCTAssertEqual(removalFrame(expireAfter: 10, timed: true), frameLimit, "\(algorithm): the frames come first")
        }
        XCTAssertEqual(try TrackerConfiguration(yaml: "tracker_type: spatial\nmin_detection_confidence: 0.35\nhigh_iou_threshold: 0.75\n"
            + "confirmation_frames: 3\nstale_frames: 15\nlost_frames: 90\nrecapture_distance: 0.5\nsmoothing: 0.6\nmax_tracks: 20\n"
            + "expire_after: 1.5\n").expireAfter, 1.5)
    }

    /// tentative → confirmed → lost → removed, a lost track found again under its ID, a
    /// tentative track dropped, and what each frame reports.
    func testTrackLifecycle() {
        var configuration = TrackerConfiguration.bytetrack
        configuration.trackBuffer = 3
        var tracker = ObjectTracker(configuration)
        let a = box(100, 100, 200, 300), b = box(400, 100, 480, 250), c = box(10, 400, 60, 470)

        // Frame 1 confirms its tracks at once.
        XCTAssertEqual(tracker.update([a]).map(\.id), [1])
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed])
        // A new box is tentative and not reported.
        XCTAssertEqual(tracker.update([a, b, c]).map(\.id), [1])
        XCTAssertEqual(tracker.tracks.map(\.id), [1, 2, 3])
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed, .tentative, .tentative])
        // Matched again it is confirmed; a tentative track not matched is removed.
        let third = tracker.update([b, a])
        XCTAssertEqual(third.map(\.id), [1, 2])
        XCTAssertEqual(third[0].xyxy.map { $0.rounded() }, a.xyxy, "the filter's box, close to the detection")
        XCTAssertEqual(tracker.removedTracks.map(\.id), [3])
        XCTAssertEqual(tracker.removedTracks.map(\.state), [.removed])
        // Unmatched, a confirmed track is lost, then found again under its ID.
        XCTAssertEqual(tracker.update([b]).map(\.id), [2])
        XCTAssertEqual(tracker.tracks.first { $0.id == 1 }?.state, .lost)
        XCTAssertEqual(tracker.tracks.first { $0.id == 1 }?.framesSinceSeen, 1)
        XCTAssertEqual(tracker.update([a, b]).map(\.id), [2, 1])
        XCTAssertEqual(tracker.tracks.first { $0.id == 1 }?.history.count, 4)
        // Lost for more than trackBuffer frames, it is removed.
        for frame in 6...9 {
            XCTAssertEqual(tracker.update([b]).map(\.id), [2], "frame \(frame)")
            XCTAssertEqual(tracker.removedTracks.map(\.id), frame == 9 ? [1] : [], "frame \(frame)")
        }
        XCTAssertEqual(tracker.tracks.map(\.id), [2])
        // As in Ultralytics, a track removed stays findable for one more frame.
        var copy = tracker
        XCTAssertEqual(copy.update([b, a]).map(\.id), [2, 1])
        // Then it is gone, and IDs are never reused: the next track is 4.
        XCTAssertEqual(tracker.update([b]).map(\.id), [2])
        XCTAssertEqual(tracker.update([b, a]).map(\.id), [2])
        XCTAssertEqual(tracker.update([b, a]).map(\.id), [2, 4])
        XCTAssertEqual(tracker.frame, 12)
    }

    /// Frames without a confirmed track report the detections without IDs, or nothing while a
    /// new track waits; reset starts IDs at 1 again.
    func testUntrackedFramesAndReset() {
        var tracker = ObjectTracker(.botsort)
        let weak = box(100, 100, 200, 300, conf: 0.2)
        XCTAssertEqual(tracker.update([weak]), [weak], "too weak to start a track: reported as detected")
        XCTAssertEqual(tracker.update([]), [])
        let strong = box(300, 100, 400, 300)
        XCTAssertEqual(tracker.update([strong]), [], "tentative until matched again")
        XCTAssertEqual(tracker.update([strong]).map(\.id), [1])
        XCTAssertEqual(tracker.update([box(10, 10, 10, 50), strong]).map(\.id), [1], "a box without area is ignored")
        tracker.reset()
        XCTAssertEqual(tracker.frame, 0)
        XCTAssertTrue(tracker.tracks.isEmpty)
        XCTAssertEqual(tracker.update([strong]).map(\.id), [1])
    }

    func testSmoothingKeepsIDs() throws {
        var smoother = try BoxSmoother(factor: 0.5)
        let first = Box(xyxy: [0, 0, 10, 10], conf: 0.5, cls: 0, name: "person", originalShape: [100, 100], id: 7)
        let second = Box(xyxy: [10, 10, 30, 30], conf: 0.9, cls: 0, name: "person", originalShape: [100, 100], id: 7)
        XCTAssertEqual(smoother.smooth([first]), [first])
        let smoothed = smoother.smooth([second, box(1, 2, 3, 4)])
        XCTAssertEqual(smoothed[0].xyxy, [5, 5, 20, 20])
        XCTAssertEqual(smoothed[0].conf, 0.7, accuracy: 1e-6)
        XCTAssertEqual(smoothed[0].id, 7)
        XCTAssertEqual(smoothed[1], box(1, 2, 3, 4))
        XCTAssertThrowsError(try BoxSmoother(factor: 0))
        XCTAssertThrowsError(try BoxSmoother(factor: .nan))
    }

    /// `"id"` is in the JSON boxes only when they are tracked, and decodes back.
    func testIDsInJSONAndDrawing() throws {
        let tracked = [Box(xyxy: [10, 10, 50, 60], conf: 0.91, cls: 0, name: "person", originalShape: [80, 80], id: 7)]
        var untracked = tracked
        untracked[0].id = nil
        let image = try Image(pixels: [UInt8](repeating: 0, count: 80 * 80 * 3), width: 80, height: 80, format: .rgb)
        func results(_ boxes: [Box]) -> Results {
            Results(task: .detect, originalShape: [80, 80], inputShape: [1, 3, 64, 64], boxes: boxes, image: image)
        }
        let json = try JSONEncoder().encode(results(tracked))
        XCTAssertTrue(String(decoding: json, as: UTF8.self).contains("\"id\":[7]"))
        XCTAssertEqual(try JSONDecoder().decode(Results.self, from: json).boxes.map(\.id), [7])
        let plain = try JSONEncoder().encode(results(untracked))
        XCTAssertFalse(String(decoding: plain, as: UTF8.self).contains("\"id\""))
        XCTAssertEqual(try JSONDecoder().decode(Results.self, from: plain).boxes.map(\.id), [nil])
        XCTAssertNotEqual(try results(tracked).annotated(), try results(untracked).annotated(), "the label shows id:7")
    }

    /// A session keeps its tracker across a model swap, restarts it on request, and keeps each
    /// segment mask with its tracked box.
    func testSessionTracking() async throws {
        let bus = try sharedFile("images/bus.jpg")
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 320),
                                      source: .images(Array(repeating: bus, count: 4)), tracker: .bytetrack)
        XCTAssertEqual(session.configuration.confidenceThreshold, 0.1, "as model.track")
        XCTAssertEqual(session.tracker, .bytetrack)
        var ids = [[Int?]]()
        for await result in session.results {
            ids.append(result.boxes.map(\.id))
            if ids.count == 1 { session.model = try Fixtures.model("yolo26n", imageSize: 320) }
            if ids.count == 2 {
                XCTAssertEqual(session.tracks.first?.history.count, 2)
                session.resetTracker()
            }
        }
        XCTAssertNil(session.error)
        XCTAssertEqual(ids.count, 4)
        XCTAssertFalse(ids[0].isEmpty)
        XCTAssertEqual(ids[0], (1...ids[0].count).map { $0 }, "frame 1 confirms its tracks at once")
        XCTAssertEqual(Set(ids[1]), Set(ids[0]), "the swapped model's boxes keep their tracks")
        XCTAssertEqual(ids[2], ids[0], "IDs from 1 again after the reset")
        XCTAssertEqual(ids[3], ids[1])

        let segment = try YOLOSession(model: try Fixtures.model("yolo26n-seg", imageSize: 320),
                                      source: .images([bus, bus]), tracker: .botsort)
        var frames = 0
        for await result in segment.results {
            frames += 1
            XCTAssertFalse(result.boxes.isEmpty)
            XCTAssertEqual(result.masks.count, result.boxes.count)
            XCTAssertTrue(result.boxes.allSatisfy { $0.id != nil })
            // Each tracked box is its detection's filtered box: its mask lies around it.
            for (box, mask) in zip(result.boxes, result.masks) {
                let region = mask.bitmap!.region
                XCTAssertLessThan(abs(Float(region.x) - box.xyxy[0]), 0.1 * (box.xyxy[2] - box.xyxy[0]) + 4)
            }
        }
        XCTAssertEqual(frames, 2)
        XCTAssertNil(segment.error)
    }

    /// TrackTrack's camera-motion estimate on frames too small for it, flat frames and frames
    /// that change size: the identity, and tracking goes on.
    func testTrackTrackOnOddFrames() throws {
        var tracker = ObjectTracker(.tracktrack)
        let box = Box(xyxy: [1, 1, 40, 60], conf: 0.9, cls: 0, name: "person", originalShape: [64, 64])
        for (width, height, value) in [(1, 1, 0), (5, 4, 9), (64, 64, 128), (64, 64, 128), (48, 32, 7), (64, 64, 0), (64, 64, 255)] {
            let image = try Image(pixels: [UInt8](repeating: UInt8(value), count: width * height * 3), width: width, height: height,
                                  format: .rgb)
            let results = Results(task: .detect, originalShape: [64, 64], inputShape: [1, 3, 64, 64], boxes: [box], image: image)
            _ = try tracker.update(results)
        }
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed], "matched in every frame, confirmed after three")
        XCTAssertEqual(tracker.tracks.first?.box.xyxy.map { $0.rounded() }, box.xyxy, "no camera motion found")
    }

    func testClassifyModelCannotBeTracked() throws {
        let model = try Fixtures.model("yolo26n-cls", imageSize: 64)
        XCTAssertThrowsError(try YOLOSession(model: model, source: .images([sharedFile("images/bus.jpg")]),
                                             tracker: .bytetrack)) { error in
            XCTAssertEqual(error as? TrackingError, .unsupportedTask(.classify))
            XCTAssertTrue(error.localizedDescription.contains("classify"), error.localizedDescription)
        }
    }
}

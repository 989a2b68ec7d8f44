/// The result of `linearAssignment`: matched (row, column) pairs in row order, and the rows and
/// columns left unmatched, ascending.
package struct LinearAssignment: Sendable, Equatable {
    package var matches: [(row: Int, column: Int)]
    package var unmatchedRows: [Int]
    package var unmatchedColumns: [Int]

    package init(matches: [(row: Int, column: Int)], unmatchedRows: [Int], unmatchedColumns: [Int]) {
        (self.matches, self.unmatchedRows, self.unmatchedColumns) = (matches, unmatchedRows, unmatchedColumns)
    }

    package static func == (a: Self, b: Self) -> Bool {
        a.matches.map(\.row) == b.matches.map(\.row) && a.matches.map(\.column) == b.matches.map(\.column)
            && a.unmatchedRows == b.unmatchedRows && a.unmatchedColumns == b.unmatchedColumns
    }
}

/// Minimum-cost matching of the rows of a `rows × columns` cost matrix (row-major) to its
/// columns where leaving a row or a column unmatched costs `costLimit / 2`, as
/// `lap.lapjv(cost, extend_cost=True, cost_limit=costLimit)` solves it for Ultralytics'
/// `matching.linear_assignment`: the matrix is extended to a square one of side rows + columns
/// (`costLimit / 2` beside and below it, 0 in the opposite corner) and solved exactly, in
/// Double, by the Jonker–Volgenant algorithm.
///
/// Ties: the steps (column reduction, reduction transfer, two rounds of augmenting row
/// reduction, then shortest augmenting paths) run in lap's order and break ties as lap does
/// (lowest row for a column's minimum, rows that are the minimum of several columns keep the
/// last column, the last free column among equally near ones ends a path), so among optimal
/// assignments of equal cost the same one is chosen. Non-finite costs never match.
package func linearAssignment(_ cost: [Double], rows: Int, columns: Int, costLimit: Double) -> LinearAssignment {
    precondition(cost.count == rows * columns, "a \(rows)×\(columns) matrix needs \(rows * columns) costs")
    guard rows > 0, columns > 0 else {
        return LinearAssignment(matches: [], unmatchedRows: Array(0..<rows), unmatchedColumns: Array(0..<columns))
    }
    let never = 2 * abs(costLimit) + 1
    var solver = JonkerVolgenant(rows: rows, columns: columns, half: costLimit / 2)
    defer { solver.deallocate() }
    for k in cost.indices { solver.real[k] = cost[k].isFinite ? cost[k] : never }
    solver.solve()
    var matches = [(row: Int, column: Int)](), unmatchedRows = [Int](), unmatchedColumns = [Int]()
    matches.reserveCapacity(min(rows, columns))
    for r in 0..<rows {
        if (0..<columns).contains(solver.x[r]) { matches.append((r, solver.x[r])) } else { unmatchedRows.append(r) }
    }
    for c in 0..<columns where !(0..<rows).contains(solver.y[c]) { unmatchedColumns.append(c) }
    return LinearAssignment(matches: matches, unmatchedRows: unmatchedRows, unmatchedColumns: unmatchedColumns)
}

/// The Jonker–Volgenant shortest-augmenting-path algorithm on lap's extended square matrix of
/// side n = rows + columns, in the order lap runs its steps. Only the real `rows × columns`
/// block is stored: every other entry is `half` (beside and below it) or 0 (the opposite
/// corner), read through `cost(_:_:)`. Its buffers are allocated once per problem.
private struct JonkerVolgenant {
    let rows: Int, columns: Int, n: Int, half: Double
    /// The real costs, `rows × columns` row-major.
    let real: UnsafeMutableBufferPointer<Double>
    /// The column of each row and the row of each column (-1: none), and the column potentials.
    let x: UnsafeMutableBufferPointer<Int>, y: UnsafeMutableBufferPointer<Int>, v: UnsafeMutableBufferPointer<Double>
    /// Rows without a column, `free[..<freeCount]`.
    let free: UnsafeMutableBufferPointer<Int>
    var freeCount = 0
    /// The shortest-path search's columns in order (done, to scan, to do), predecessor rows and
    /// distances.
    let order: UnsafeMutableBufferPointer<Int>, predecessor: UnsafeMutableBufferPointer<Int>
    let d: UnsafeMutableBufferPointer<Double>

    init(rows: Int, columns: Int, half: Double) {
        (self.rows, self.columns, self.half) = (rows, columns, half)
        n = rows + columns
        real = .allocate(capacity: rows * columns)
        x = .allocate(capacity: n)
        x.initialize(repeating: -1)
        y = .allocate(capacity: n)
        y.initialize(repeating: 0)
        v = .allocate(capacity: n)
        v.initialize(repeating: .infinity)
        free = .allocate(capacity: n)
        order = .allocate(capacity: n)
        predecessor = .allocate(capacity: n)
        d = .allocate(capacity: n)
    }

    func deallocate() {
        for buffer in [x, y, free, order, predecessor] { buffer.deallocate() }
        for buffer in [real, v, d] { buffer.deallocate() }
    }

    /// Entry (i, j) of the extended matrix.
    @inline(__always) private func cost(_ i: Int, _ j: Int) -> Double {
        if i < rows { return j < columns ? real[i * columns + j] : half }
        return j < columns ? half : 0
    }

    /// Row i's reduced costs `cost(i, j) − v[j]` into `d`, a segment at a time so that the loops
    /// run on vectors.
    private func reduce(row i: Int) {
        if i < rows {
            let costs = real.baseAddress! + i * columns
            for j in 0..<columns { d[j] = costs[j] - v[j] }
        } else {
            for j in 0..<columns { d[j] = half - v[j] }
        }
        let beyond: Double = i < rows ? half : 0
        for j in columns..<n { d[j] = beyond - v[j] }
    }

    mutating func solve() {
        reduceColumns()
        for _ in 0..<2 where freeCount > 0 { reduceRows() }
        for k in 0..<freeCount { augment(from: free[k]) }
    }

    /// Column reduction and reduction transfer: each column's potential is its minimum and its
    /// lowest minimal row takes it (a row minimal in several columns keeps the last); the free
    /// rows are those that took none.
    private mutating func reduceColumns() {
        // Row by row, a column takes a strictly lower cost. Rows alike in a column after the
        // first change nothing there: of the real rows, only row 0 counts in the columns beyond
        // the real ones (all `half`), and of the rows below, only the first.
        for i in 0..<rows {
            let costs = real.baseAddress! + i * columns
            for j in 0..<columns {
                let lower = costs[j] < v[j]
                v[j] = lower ? costs[j] : v[j]
                y[j] = lower ? i : y[j]
            }
        }
        for j in columns..<n where half < v[j] { (v[j], y[j]) = (half, 0) }
        for j in 0..<n where cost(rows, j) < v[j] { (v[j], y[j]) = (cost(rows, j), rows) }
        var unique = [Bool](repeating: true, count: n)
        for j in (0..<n).reversed() {
            let i = y[j]
            if x[i] < 0 { x[i] = j } else { unique[i] = false; y[j] = -1 }
        }
        for i in 0..<n {
            if x[i] < 0 {
                free[freeCount] = i
                freeCount += 1
            } else if unique[i] {
                let j = x[i]
                reduce(row: i)
                v[j] -= min(minimum(0..<j), minimum(j + 1..<n))
            }
        }
    }

    /// Augmenting row reduction: each free row takes its cheapest column (by reduced cost),
    /// lowering that column's potential to the second cheapest when it can, and the row it
    /// displaces is free again, retried at once when the potential fell.
    private mutating func reduceRows() {
        var current = 0, kept = 0, rounds = 0
        while current < freeCount {
            rounds += 1
            let row = free[current]
            current += 1
            // The least reduced cost at its first column, then the least of the others at its
            // first: the pair a scan keeping the two least (earlier columns winning ties) ends with.
            // A tie for the least is the second; the columns before the first are all greater.
            reduce(row: row)
            let least = minimum(0..<n)
            var j1 = first(least, in: 0..<n)
            let j2: Int
            if let tie = (j1 + 1..<n).first(where: { d[$0] == least }) {
                j2 = tie
            } else {
                let before = minimum(0..<j1), after = minimum(j1 + 1..<n)
                j2 = before <= after ? first(before, in: 0..<j1) : first(after, in: j1 + 1..<n)
            }
            let u1 = d[j1], u2 = d[j2]
            var i0 = y[j1]
            let lowered = v[j1] - (u2 - u1), lowers = lowered < v[j1]
            if rounds < current * n {
                if lowers {
                    v[j1] = lowered
                } else if i0 >= 0 {
                    j1 = j2
                    i0 = y[j2]
                }
                if i0 >= 0 {
                    if lowers {
                        current -= 1
                        free[current] = i0
                    } else {
                        free[kept] = i0
                        kept += 1
                    }
                }
            } else if i0 >= 0 {
                free[kept] = i0
                kept += 1
            }
            x[row] = j1
            y[j1] = row
        }
        freeCount = kept
    }

    /// The least of `d[range]`, +∞ for none. Exact (`d` never holds a NaN), so taken in four
    /// independent lanes.
    private func minimum(_ range: Range<Int>) -> Double {
        var a = Double.infinity, b = a, c = a, e = a, j = range.lowerBound
        while j + 4 <= range.upperBound {
            (a, b, c, e) = (min(a, d[j]), min(b, d[j + 1]), min(c, d[j + 2]), min(e, d[j + 3]))
            j += 4
        }
        while j < range.upperBound {
            a = min(a, d[j])
            j += 1
        }
        return min(min(a, b), min(c, e))
    }

    /// The first column of `range` whose `d` is `value`.
    private func first(_ value: Double, in range: Range<Int>) -> Int {
        range.first { d[$0] == value }!
    }

    /// Dijkstra's shortest path from a free row to a free column over reduced costs, then the
    /// assignments along it flipped.
    private func augment(from start: Int) {
        for j in 0..<n {
            order[j] = j
            predecessor[j] = start
        }
        reduce(row: start)
        // order[..<lo]: done; order[lo..<hi]: at the current minimum distance, to scan.
        var lo = 0, hi = 0, ready = 0, end = -1
        search: while true {
            if lo == hi {
                ready = lo
                hi = lo + 1
                var nearest = d[order[lo]]
                for k in hi..<n {
                    let j = order[k]
                    guard d[j] <= nearest else { continue }
                    if d[j] < nearest { hi = lo; nearest = d[j] }
                    order.swapAt(k, hi)
                    hi += 1
                }
                for k in lo..<hi where y[order[k]] < 0 { end = order[k] }
                if end >= 0 { break search }
            }
            // Scan a column at the minimum: its row may bring other columns nearer.
            let j = order[lo]
            lo += 1
            let i = y[j], nearest = d[j], h = cost(i, j) - v[j] - nearest
            for k in hi..<n {
                let j = order[k], reduced = cost(i, j) - v[j] - h
                guard reduced < d[j] else { continue }
                d[j] = reduced
                predecessor[j] = i
                if reduced == nearest {
                    if y[j] < 0 {
                        end = j
                        lo -= 1
                        break search
                    }
                    order.swapAt(k, hi)
                    hi += 1
                }
            }
        }
        let nearest = d[order[lo]]
        for k in 0..<ready {
            let j = order[k]
            v[j] += d[j] - nearest
        }
        var i = -1, j = end
        while i != start {
            i = predecessor[j]
            y[j] = i
            swap(&j, &x[i])
        }
    }
}

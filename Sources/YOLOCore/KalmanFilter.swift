/// Ultralytics' constant-velocity Kalman filter for boxes (`trackers/utils/kalman_filter.py`), in
/// Double as its NumPy float64: 8 states, the 4 measured box values then their velocities, with
/// noise proportional to the box size.
package struct KalmanFilter: Sendable, Equatable {
    /// What the 4 measured values are.
    package enum Form: Sendable, Equatable {
        /// Centre x, centre y, aspect ratio w / h, height (`KalmanFilterXYAH`, ByteTrack).
        case xyah
        /// Centre x, centre y, width, height (`KalmanFilterXYWH`, BoT-SORT).
        case xywh
    }

    /// A Gaussian over the 8 states: `mean` [8], `covariance` [8 × 8] row-major.
    package struct State: Sendable, Equatable {
        package var mean: [Double]
        package var covariance: [Double]
    }

    package let form: Form
    private static let positionWeight = 1.0 / 20, velocityWeight = 1.0 / 160

    package init(_ form: Form) { self.form = form }

    /// Standard deviations of the 4 measured values for `box` (x, y, a or w, h): `weight` times
    /// the height (xyah) or the matching side (xywh); `constant` for the aspect ratio.
    private func deviations(_ box: ArraySlice<Double>, weight: Double, constant: Double) -> [Double] {
        let w = box[box.startIndex + 2], h = box[box.startIndex + 3]
        switch form {
        case .xyah: return [weight * h, weight * h, constant, weight * h]
        case .xywh: return [weight * w, weight * h, weight * w, weight * h]
        }
    }

    /// A new track from its first measurement [4]: zero velocity, uncertainty from its size.
    package func initiate(_ measurement: [Double]) -> State {
        let m = measurement[...]
        let std = deviations(m, weight: 2 * Self.positionWeight, constant: 1e-2)
            + deviations(m, weight: 10 * Self.velocityWeight, constant: 1e-5)
        var covariance = [Double](repeating: 0, count: 64)
        for k in 0..<8 { covariance[k * 9] = std[k] * std[k] }
        return State(mean: measurement + [0, 0, 0, 0], covariance: covariance)
    }

    /// One frame ahead: `mean = F mean`, `covariance = F P Fᵀ + Q` with F adding each velocity to
    /// its value and Q from the predicted box's size before the step.
    package func predict(_ s: State) -> State {
        let box = s.mean[0..<4]
        let std = deviations(box, weight: Self.positionWeight, constant: 1e-2)
            + deviations(box, weight: Self.velocityWeight, constant: 1e-5)
        var mean = s.mean
        for k in 0..<4 { mean[k] += s.mean[k + 4] }
        // F P, then (F P) Fᵀ as multi_predict orders it: F adds the lower rows to the upper ones,
        // Fᵀ the right columns to the left ones (the same sums as NumPy's products).
        var covariance = s.covariance
        for r in 0..<4 { for c in 0..<8 { covariance[r * 8 + c] += s.covariance[(r + 4) * 8 + c] } }
        for r in 0..<8 { for c in 0..<4 { covariance[r * 8 + c] += covariance[r * 8 + c + 4] } }
        for k in 0..<8 { covariance[k * 9] += std[k] * std[k] }
        return State(mean: mean, covariance: covariance)
    }

    /// Corrects `s` with a measurement [4]: gain `K = P Hᵀ S⁻¹` (solved, not inverted) with the
    /// innovation covariance `S = H P Hᵀ + R`, `mean += K (z − H mean)`, `P −= K S Kᵀ`.
    package func update(_ s: State, measurement: [Double]) -> State {
        let std = deviations(s.mean[0..<4], weight: Self.positionWeight, constant: 1e-1)
        var projected = [Double](repeating: 0, count: 16)
        for r in 0..<4 { for c in 0..<4 { projected[r * 4 + c] = s.covariance[r * 8 + c] } }
        for k in 0..<4 { projected[k * 5] += std[k] * std[k] }
        // P Hᵀ is P's first 4 columns; Kᵀ solves S Kᵀ = (P Hᵀ)ᵀ.
        var crossT = [Double](repeating: 0, count: 32)
        for r in 0..<8 { for c in 0..<4 { crossT[c * 8 + r] = s.covariance[r * 8 + c] } }
        let gain = transpose(solve(projected, crossT, 4, 8), 4, 8)
        var mean = s.mean
        for r in 0..<8 {
            for k in 0..<4 { mean[r] += (measurement[k] - s.mean[k]) * gain[r * 4 + k] }
        }
        let correction = multiply(multiply(gain, projected, 8, 4, 4), transpose(gain, 8, 4), 8, 4, 8)
        return State(mean: mean, covariance: zip(s.covariance, correction).map { $0 - $1 })
    }
}

/// `a` [n × k] times `b` [k × m], row-major.
private func multiply(_ a: [Double], _ b: [Double], _ n: Int, _ k: Int, _ m: Int) -> [Double] {
    var out = [Double](repeating: 0, count: n * m)
    for r in 0..<n {
        for c in 0..<m {
            var sum = 0.0
            for i in 0..<k { sum += a[r * k + i] * b[i * m + c] }
            out[r * m + c] = sum
        }
    }
    return out
}

/// `a` [n × m] → [m × n].
private func transpose(_ a: [Double], _ n: Int, _ m: Int) -> [Double] {
    var out = [Double](repeating: 0, count: n * m)
    for r in 0..<n { for c in 0..<m { out[c * n + r] = a[r * m + c] } }
    return out
}

/// X with `a X = b` for `a` [n × n], `b` [n × m]: Gaussian elimination with partial pivoting,
/// as LAPACK's `gesv` behind `np.linalg.solve`.
private func solve(_ a: [Double], _ b: [Double], _ n: Int, _ m: Int) -> [Double] {
    var a = a, b = b
    for col in 0..<n {
        let pivot = (col..<n).max { abs(a[$0 * n + col]) < abs(a[$1 * n + col]) }!
        if pivot != col {
            for c in 0..<n { a.swapAt(col * n + c, pivot * n + c) }
            for c in 0..<m { b.swapAt(col * m + c, pivot * m + c) }
        }
        for r in col + 1..<n {
            let f = a[r * n + col] / a[col * n + col]
            for c in col..<n { a[r * n + c] -= f * a[col * n + c] }
            for c in 0..<m { b[r * m + c] -= f * b[col * m + c] }
        }
    }
    for r in stride(from: n - 1, through: 0, by: -1) {
        for c in 0..<m {
            var sum = b[r * m + c]
            for k in r + 1..<n { sum -= a[r * n + k] * b[k * m + c] }
            b[r * m + c] = sum / a[r * n + r]
        }
    }
    return b
}

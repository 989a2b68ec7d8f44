/// Ultralytics' constant-velocity Kalman filter for boxes (`trackers/utils/kalman_filter.py`), in
/// Double as its NumPy float64: 8 states, the 4 measured box values then their velocities, with
/// noise proportional to the box size.
///
/// F, H, Q and R never couple one measured value with another, so the covariance stays 4
/// independent 2 × 2 blocks (value k with its velocity k + 4) and every step runs on those
/// blocks alone, lane k of each SIMD4. The entries outside them would only add exact zeros to
/// the full products, so the blocks hold the same numbers the 8 × 8 products give.
package struct KalmanFilter: Sendable, Equatable {
    /// What the 4 measured values are.
    package enum Form: Sendable, Equatable {
        /// Centre x, centre y, aspect ratio w / h, height (`KalmanFilterXYAH`, ByteTrack).
        case xyah
        /// Centre x, centre y, width, height (`KalmanFilterXYWH`, BoT-SORT).
        case xywh
    }

    /// A Gaussian over the 8 states.
    package struct State: Sendable, Equatable {
        /// The 4 measured values, then their velocities.
        package var mean: SIMD8<Double>
        /// Lane k of each: P[k, k], P[k, k + 4], P[k + 4, k], P[k + 4, k + 4].
        var valueVariance, valueVelocity, velocityValue, velocityVariance: SIMD4<Double>

        /// The covariance, 8 × 8 row-major.
        package var covariance: [Double] {
            var p = [Double](repeating: 0, count: 64)
            for k in 0..<4 {
                p[k * 9] = valueVariance[k]
                p[k * 8 + k + 4] = valueVelocity[k]
                p[(k + 4) * 8 + k] = velocityValue[k]
                p[(k + 4) * 9] = velocityVariance[k]
            }
            return p
        }
    }

    package let form: Form
    private static let positionWeight = 1.0 / 20, velocityWeight = 1.0 / 160

    package init(_ form: Form) { self.form = form }

    /// Standard deviations of the 4 measured values for `box` (x, y, a or w, h): `weight` times
    /// the height (xyah) or the matching side (xywh); `constant` for the aspect ratio.
    private func deviations(_ box: SIMD4<Double>, weight: Double, constant: Double) -> SIMD4<Double> {
        let w = box[2], h = box[3]
        switch form {
        case .xyah: return SIMD4(weight * h, weight * h, constant, weight * h)
        case .xywh: return SIMD4(weight * w, weight * h, weight * w, weight * h)
        }
    }

    /// A new track from its first measurement: zero velocity, uncertainty from its size.
    package func initiate(_ measurement: SIMD4<Double>) -> State {
        let value = deviations(measurement, weight: 2 * Self.positionWeight, constant: 1e-2)
        let velocity = deviations(measurement, weight: 10 * Self.velocityWeight, constant: 1e-5)
        return State(mean: SIMD8(lowHalf: measurement, highHalf: .zero), valueVariance: value * value,
                     valueVelocity: .zero, velocityValue: .zero, velocityVariance: velocity * velocity)
    }

    /// One frame ahead: `mean = F mean`, `covariance = F P Fᵀ + Q` with F adding each velocity to
    /// its value and Q from the box's size before the step.
    package func predict(_ s: State) -> State {
        let box = s.mean.lowHalf
        let value = deviations(box, weight: Self.positionWeight, constant: 1e-2)
        let velocity = deviations(box, weight: Self.velocityWeight, constant: 1e-5)
        // F P adds the velocity rows to the value rows, then (F P) Fᵀ the velocity columns to
        // the value columns, in multi_predict's order.
        return State(mean: SIMD8(lowHalf: box + s.mean.highHalf, highHalf: s.mean.highHalf),
                     valueVariance: ((s.valueVariance + s.velocityValue) + (s.valueVelocity + s.velocityVariance)) + value * value,
                     valueVelocity: s.valueVelocity + s.velocityVariance,
                     velocityValue: s.velocityValue + s.velocityVariance,
                     velocityVariance: s.velocityVariance + velocity * velocity)
    }

    /// Corrects `s` with a measurement: gain `K = P Hᵀ S⁻¹` with the innovation covariance
    /// `S = H P Hᵀ + R` (diagonal), `mean += K (z − H mean)`, `P −= (K S) Kᵀ`.
    package func update(_ s: State, measurement: SIMD4<Double>) -> State {
        let std = deviations(s.mean.lowHalf, weight: Self.positionWeight, constant: 1e-1)
        let innovationVariance = s.valueVariance + std * std
        let valueGain = s.valueVariance / innovationVariance, velocityGain = s.velocityValue / innovationVariance
        let innovation = measurement - s.mean.lowHalf
        let scaledValue = valueGain * innovationVariance, scaledVelocity = velocityGain * innovationVariance
        return State(mean: SIMD8(lowHalf: s.mean.lowHalf + innovation * valueGain,
                                 highHalf: s.mean.highHalf + innovation * velocityGain),
                     valueVariance: s.valueVariance - scaledValue * valueGain,
                     valueVelocity: s.valueVelocity - scaledValue * velocityGain,
                     velocityValue: s.velocityValue - scaledVelocity * valueGain,
                     velocityVariance: s.velocityVariance - scaledVelocity * velocityGain)
    }

    /// A Gaussian over the 8 states with a full covariance, for trackers that warp their tracks
    /// by camera motion: a rotation couples x with y, which the 2 × 2 blocks of `State` cannot hold.
    package struct DenseState: Sendable, Equatable {
        package var mean: SIMD8<Double>
        /// 8 × 8 row-major.
        package var covariance: [Double]
    }

    /// `initiate` with a full covariance.
    package func initiateDense(_ measurement: SIMD4<Double>) -> DenseState {
        let s = initiate(measurement)
        return DenseState(mean: s.mean, covariance: s.covariance)
    }

    /// `predict` with a full covariance: `F P Fᵀ + Q`, F adding each velocity to its value.
    package func predict(_ s: DenseState) -> DenseState {
        let box = s.mean.lowHalf
        let value = deviations(box, weight: Self.positionWeight, constant: 1e-2)
        let velocity = deviations(box, weight: Self.velocityWeight, constant: 1e-5)
        var p = s.covariance
        // F P: rows k += rows k + 4; then (F P) Fᵀ: columns k += columns k + 4.
        for k in 0..<4 { for c in 0..<8 { p[k * 8 + c] += p[(k + 4) * 8 + c] } }
        for r in 0..<8 { for k in 0..<4 { p[r * 8 + k] += p[r * 8 + k + 4] } }
        for k in 0..<4 {
            p[k * 9] += value[k] * value[k]
            p[(k + 4) * 9] += velocity[k] * velocity[k]
        }
        return DenseState(mean: SIMD8(lowHalf: box + s.mean.highHalf, highHalf: s.mean.highHalf), covariance: p)
    }

    /// `update` with a full covariance; with `confidence`, the measurement noise is scaled by
    /// max(1 − confidence, 0.05) (NSA Kalman, as TrackTrack updates).
    package func update(_ s: DenseState, measurement: SIMD4<Double>, confidence: Double? = nil) -> DenseState {
        var std = deviations(s.mean.lowHalf, weight: Self.positionWeight, constant: 1e-1)
        std *= std
        if let confidence { std *= max(1 - confidence, 0.05) }
        let p = s.covariance
        // S = P[:4, :4] + R; the gain K = P[:, :4] S⁻¹, solved as Sᵀ Kᵀ = P[:, :4]ᵀ.
        var projected = [Double](repeating: 0, count: 16)
        for r in 0..<4 { for c in 0..<4 { projected[r * 4 + c] = p[r * 8 + c] } }
        for k in 0..<4 { projected[k * 5] += std[k] }
        var rhs = [Double](repeating: 0, count: 32)   // 4 × 8: P[:, :4]ᵀ
        for r in 0..<8 { for c in 0..<4 { rhs[c * 8 + r] = p[r * 8 + c] } }
        let solution = solve(projected, rhs, columns: 8)   // 4 × 8 = Kᵀ
        let innovation = measurement - s.mean.lowHalf
        var mean = s.mean
        for r in 0..<8 { for k in 0..<4 { mean[r] += innovation[k] * solution[k * 8 + r] } }
        // P −= K S Kᵀ, with S Kᵀ = P[:, :4]ᵀ.
        var covariance = p
        for r in 0..<8 {
            for c in 0..<8 {
                var sum = 0.0
                for k in 0..<4 { sum += solution[k * 8 + r] * rhs[k * 8 + c] }
                covariance[r * 8 + c] -= sum
            }
        }
        return DenseState(mean: mean, covariance: covariance)
    }

    /// `a x = b` for a 4 × 4 `a` and a 4 × `columns` `b`, by Gaussian elimination with partial
    /// pivoting as LAPACK's `gesv` does.
    private func solve(_ a: [Double], _ b: [Double], columns: Int) -> [Double] {
        var a = a, b = b
        for k in 0..<4 {
            let pivot = (k..<4).max { abs(a[$0 * 4 + k]) < abs(a[$1 * 4 + k]) }!
            if pivot != k {
                for c in 0..<4 { a.swapAt(k * 4 + c, pivot * 4 + c) }
                for c in 0..<columns { b.swapAt(k * columns + c, pivot * columns + c) }
            }
            for r in k + 1..<4 {
                let f = a[r * 4 + k] / a[k * 4 + k]
                for c in k..<4 { a[r * 4 + c] -= f * a[k * 4 + c] }
                for c in 0..<columns { b[r * columns + c] -= f * b[k * columns + c] }
            }
        }
        for k in (0..<4).reversed() {
            for c in 0..<columns {
                var x = b[k * columns + c]
                for j in k + 1..<4 { x -= a[k * 4 + j] * b[j * columns + c] }
                b[k * columns + c] = x / a[k * 4 + k]
            }
        }
        return b
    }
}

extension KalmanFilter.State {
    /// `mean` with the covariance of `other`.
    init(mean: SIMD8<Double>, covarianceOf other: Self) {
        self = other
        self.mean = mean
    }
}

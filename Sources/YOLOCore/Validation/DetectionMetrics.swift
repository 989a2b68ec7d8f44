import Foundation

/// The ten IoU thresholds 0.50, 0.55, …, 0.95 of COCO's mAP50-95, in Float32 as
/// `torch.linspace(0.5, 0.95, 10)` makes them.
package let iouThresholds: [Float] = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]

/// Ultralytics `box_iou`: the IoU of every label (rows) with every prediction (columns).
package func boxIoU(_ labels: [SIMD4<Float>], _ predictions: [SIMD4<Float>]) -> [[Float]] {
    let n = predictions.count, iou = pairwiseIoU(labels, predictions)
    return labels.indices.map { Array(iou[$0 * n ..< ($0 + 1) * n]) }
}

/// The IoU of every box of `a` with every box of `b` (xyxy), row-major, in Float32 with
/// Ultralytics' 1e-7 in the denominator (`box_iou`, and the trackers' `bbox_ioa`).
package func pairwiseIoU(_ a: [SIMD4<Float>], _ b: [SIMD4<Float>]) -> [Float] {
    guard !a.isEmpty, !b.isEmpty else { return [] }
    let n = b.count
    // b's coordinates and areas as columns, so that the inner loop runs on vectors.
    var columns = [Float](repeating: 0, count: 5 * n)
    for (j, q) in b.enumerated() {
        (columns[j], columns[n + j], columns[2 * n + j], columns[3 * n + j]) = (q[0], q[1], q[2], q[3])
        columns[4 * n + j] = (q[2] - q[0]) * (q[3] - q[1])
    }
    return [Float](unsafeUninitializedCapacity: a.count * n) { out, count in
        columns.withUnsafeBufferPointer { c in
            let x1 = c.baseAddress!, y1 = x1 + n, x2 = y1 + n, y2 = x2 + n, area = y2 + n
            for (i, p) in a.enumerated() {
                let areaP = (p[2] - p[0]) * (p[3] - p[1]), row = out.baseAddress! + i * n
                for j in 0..<n {
                    let inter = max(min(p[2], x2[j]) - max(p[0], x1[j]), 0) * max(min(p[3], y2[j]) - max(p[1], y1[j]), 0)
                    row[j] = inter / (area[j] + areaP - inter + 1e-7)
                }
            }
        }
        count = a.count * n
    }
}

/// Ultralytics `match_predictions`: which predictions are true positives at each IoU threshold.
/// Predictions are taken in their order (descending confidence); each claims, per threshold, the
/// unclaimed label of its class with the highest IoU (the first on ties), and is correct when
/// that IoU reaches the threshold. `iou[label][prediction]`; returns `[prediction][threshold]`.
package func matchPredictions(predictedClasses: [Int], labelClasses: [Int], iou: [[Float]],
                              thresholds: [Float] = iouThresholds) -> [[Bool]] {
    var correct = [[Bool]](repeating: [Bool](repeating: false, count: thresholds.count), count: predictedClasses.count)
    var claimed = [[Bool]](repeating: [Bool](repeating: false, count: thresholds.count), count: labelClasses.count)
    let lowest = thresholds.min() ?? 0
    for j in predictedClasses.indices {
        // IoU with labels of another class counts as 0.
        let column = labelClasses.indices.map { labelClasses[$0] == predictedClasses[j] ? iou[$0][j] : 0 }
        guard column.contains(where: { $0 >= lowest }) else { continue }
        for (t, threshold) in thresholds.enumerated() {
            var best = 0, bestIoU: Float = -1
            for (k, value) in column.enumerated() {
                let available = claimed[k][t] ? 0 : value
                if available > bestIoU { (best, bestIoU) = (k, available) }
            }
            if bestIoU >= threshold {
                correct[j][t] = true
                claimed[best][t] = true
            }
        }
    }
    return correct
}

/// `np.interp(x, xp, fp, left, right)` for non-decreasing `xp`: the last `xp[j] ≤ x` sets the
/// segment, so repeated `xp` values take the last one's `fp`.
package func interpolate(_ x: Double, _ xp: [Double], _ fp: [Double], left: Double? = nil, right: Double? = nil) -> Double {
    guard let first = xp.first, let last = xp.last else { return .nan }
    if x < first { return left ?? fp[0] }
    if x > last { return right ?? fp[fp.count - 1] }
    // Binary search for the number of xp values ≤ x.
    var low = 0, high = xp.count
    while low < high {
        let mid = (low + high) / 2
        if xp[mid] <= x { low = mid + 1 } else { high = mid }
    }
    let j = low - 1
    if j == xp.count - 1 || xp[j] == x { return fp[j] }
    let slope = (fp[j + 1] - fp[j]) / (xp[j + 1] - xp[j])
    return slope * (x - xp[j]) + fp[j]
}

/// `np.linspace(0, 1, n)`: i · (1 / (n − 1)), the last exactly 1.
private func unitSteps(_ n: Int) -> [Double] {
    let step = 1 / Double(n - 1)
    return (0..<n).map { $0 == n - 1 ? 1 : Double($0) * step }
}

private let recallSteps = unitSteps(101)
/// The confidence axis of the precision, recall and F1 curves.
package let confidenceSteps = unitSteps(1000)

/// Ultralytics `compute_ap`: the area under the precision envelope (the precision made
/// non-increasing from the right) sampled at 101 recall points (COCO), by the trapezoid rule.
/// Returns the AP and the envelope with its recall axis (sentinels added at both ends).
package func averagePrecision(recall: [Double], precision: [Double]) -> (ap: Double, envelope: [Double], recall: [Double]) {
    let mrec = [0] + recall + [recall.last ?? 1, 1]
    var mpre = [1] + precision + [0, 0]
    for i in stride(from: mpre.count - 2, through: 0, by: -1) { mpre[i] = max(mpre[i], mpre[i + 1]) }
    let y = recallSteps.map { interpolate($0, mrec, mpre) }
    var ap = 0.0
    for i in 1..<y.count { ap += (recallSteps[i] - recallSteps[i - 1]) * (y[i] + y[i - 1]) / 2 }
    return (ap, mpre, mrec)
}

/// Ultralytics `smooth`: a box filter as wide as `fraction` of the curve (odd), the ends padded
/// with the end values.
private func smoothed(_ y: [Double], fraction: Double) -> [Double] {
    let width = Int((Double(y.count) * fraction * 2).rounded(.toNearestOrEven)) / 2 + 1
    let pad = width / 2
    let padded = [Double](repeating: y[0], count: pad) + y + [Double](repeating: y[y.count - 1], count: pad)
    let weight = 1 / Double(width)
    return y.indices.map { i in (0..<width).reduce(0) { $0 + padded[i + $1] * weight } }
}

/// Ultralytics `ap_per_class` for the classes that have labels: AP at the ten IoU thresholds,
/// and precision and recall at the confidence where the mean F1 over classes (smoothed) peaks.
package struct ClassMetrics: Sendable, Equatable {
    /// Classes with at least one label, ascending.
    package var classes: [Int] = []
    /// Labels of each class.
    package var labelCounts: [Int] = []
    /// AP per class at each IoU threshold.
    package var ap: [[Double]] = []
    /// Precision, recall and F1 per class at the maximum-F1 confidence.
    package var precision: [Double] = [], recall: [Double] = [], f1: [Double] = []
    /// Precision per class as a function of recall (`confidenceSteps`) at IoU 0.5: the PR curve.
    package var precisionAtRecall: [[Double]] = []

    package var meanPrecision: Double { mean(precision) }
    package var meanRecall: Double { mean(recall) }
    package var mAP50: Double { mean(ap.map { $0[0] }) }
    package var mAP50to95: Double { mean(ap.flatMap { $0 }) }

    /// - Parameters:
    ///   - correct: per prediction, true positive at each IoU threshold.
    ///   - confidence, predictedClasses: per prediction.
    ///   - labelClasses: the class of every label.
    package init(correct: [[Bool]], confidence: [Float], predictedClasses: [Int], labelClasses: [Int]) {
        // Descending confidence; ties keep their order.
        let order = confidence.indices.sorted { confidence[$0] > confidence[$1] || (confidence[$0] == confidence[$1] && $0 < $1) }
        let thresholds = correct.first?.count ?? iouThresholds.count
        var counts = [Int: Int]()
        for c in labelClasses { counts[c, default: 0] += 1 }
        classes = counts.keys.sorted()
        labelCounts = classes.map { counts[$0]! }
        let steps = confidenceSteps
        var precisionCurves = [[Double]](), recallCurves = [[Double]]()
        for (c, labels) in zip(classes, labelCounts) {
            let mine = order.filter { predictedClasses[$0] == c }
            guard !mine.isEmpty else {
                ap.append([Double](repeating: 0, count: thresholds))
                precisionCurves.append([Double](repeating: 0, count: steps.count))
                recallCurves.append([Double](repeating: 0, count: steps.count))
                precisionAtRecall.append([Double](repeating: 0, count: steps.count))
                continue
            }
            var tp = [Int](repeating: 0, count: thresholds)
            var recall = [[Double]](repeating: [], count: thresholds), precision = recall
            for (n, i) in mine.enumerated() {
                for t in 0..<thresholds {
                    if correct[i][t] { tp[t] += 1 }
                    recall[t].append(Double(tp[t]) / (Double(labels) + 1e-16))
                    precision[t].append(Double(tp[t]) / Double(n + 1))
                }
            }
            let negatedConfidence = mine.map { -Double(confidence[$0]) }
            recallCurves.append(steps.map { interpolate(-$0, negatedConfidence, recall[0], left: 0) })
            precisionCurves.append(steps.map { interpolate(-$0, negatedConfidence, precision[0], left: 1) })
            var classAP = [Double]()
            for t in 0..<thresholds {
                let result = averagePrecision(recall: recall[t], precision: precision[t])
                classAP.append(result.ap)
                if t == 0 { precisionAtRecall.append(steps.map { interpolate($0, result.recall, result.envelope) }) }
            }
            ap.append(classAP)
        }
        let f1Curves = zip(precisionCurves, recallCurves).map { p, r in
            zip(p, r).map { 2 * $0 * $1 / ($0 + $1 + 1e-16) }
        }
        guard !classes.isEmpty else { return }
        let meanF1 = steps.indices.map { i in f1Curves.reduce(0) { $0 + $1[i] } / Double(f1Curves.count) }
        let smooth = smoothed(meanF1, fraction: 0.1)
        // The first index of the maximum, as np.argmax.
        let peak = smooth.indices.max { smooth[$0] < smooth[$1] }!
        precision = precisionCurves.map { $0[peak] }
        recall = recallCurves.map { $0[peak] }
        f1 = f1Curves.map { $0[peak] }
    }
}

private func mean(_ values: [Double]) -> Double { values.isEmpty ? 0 : values.reduce(0, +) / Double(values.count) }

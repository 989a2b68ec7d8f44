import Foundation
import Tensor
import YOLONet

/// A detection in network-input pixels, before mapping back to the original image.
package struct RawDetection: Sendable, Equatable {
    /// x1, y1, x2, y2; for rotated boxes (obb) cx, cy, w, h with the angle in `extra`.
    package var box: SIMD4<Float>
    package var score: Float
    package var cls: Int
    /// The row's values after the class: 32 mask coefficients (segment), K × (x, y, visibility)
    /// keypoints (pose) or the angle (obb); empty for detect.
    package var extra: [Float] = []
}

/// End-to-end heads (YOLO26) already rank their top-k: keep rows above the confidence and in
/// the class filter, in order, up to `maxDetections` (Ultralytics `non_max_suppression`
/// with `end2end`). rows: [1, k, 6 + extra] of (x1, y1, x2, y2, score, class, extra…); for obb
/// (cx, cy, w, h, score, class, angle).
package func selectEndToEnd(_ rows: Tensor, _ config: YOLOConfiguration) -> [RawDetection] {
    guard rows.rank == 3, rows.shape[2] >= 6 else { return [] }
    let k = rows.shape[1], width = rows.shape[2]
    let admits = config.classFilter
    var kept = [RawDetection]()
    for i in 0..<k where kept.count < config.maxDetections {
        let base = i * width
        let score = rows.scalars[base + 4], c = rows.scalars[base + 5]
        // A NaN score fails the comparison; a class that is not a small integer is dropped.
        guard score > config.confidenceThreshold, c.isFinite, c >= 0, c < 1e9 else { continue }
        let cls = Int(c)
        guard admits(cls) else { continue }
        kept.append(RawDetection(box: SIMD4(rows.scalars[base], rows.scalars[base + 1], rows.scalars[base + 2], rows.scalars[base + 3]),
                                 score: score, cls: cls, extra: Array(rows.scalars[(base + 6)..<(base + width)])))
    }
    return kept
}

/// Ultralytics `non_max_suppression` for one-to-many heads: best class per anchor above the
/// confidence (with `multiLabel`, as validation runs it: every class above it, anchor by anchor),
/// class filter, the 30 000 most confident, then NMS per class (boxes offset by class × 7680) or
/// across classes, up to `maxDetections`: greedy IoU NMS (torchvision `nms`) for boxes,
/// probabilistic-IoU Fast-NMS for rotated boxes (`rotated`, obb).
/// prediction: [1, 4 + nc + extra, A] of (cx, cy, w, h, class probabilities…, extra…); the
/// extra rows (mask coefficients, keypoints, angle) are carried into `RawDetection.extra`.
/// Boxes come out as xyxy, or as cx, cy, w, h when `rotated`.
package func nonMaxSuppression(_ prediction: Tensor, _ config: YOLOConfiguration, classes: Int? = nil,
                               rotated: Bool = false, multiLabel: Bool = false) -> [RawDetection] {
    guard prediction.rank == 3, prediction.shape[1] > 4 else { return [] }
    let a = prediction.shape[2], nc = min(classes ?? prediction.shape[1] - 4, prediction.shape[1] - 4)
    let extra = prediction.shape[1] - 4 - nc
    guard nc > 0, a > 0 else { return [] }
    var best = [Float](repeating: -.infinity, count: a), bestClass = [Int32](repeating: 0, count: a)
    prediction.scalars.withUnsafeBufferPointer { p in
        best.withUnsafeMutableBufferPointer { b in
            bestClass.withUnsafeMutableBufferPointer { bc in
                columnMaxima(p.baseAddress! + 4 * a, rows: nc, columns: a, b.baseAddress!, bc.baseAddress!)
            }
        }
    }
    let admits = config.classFilter
    let multiLabel = multiLabel && nc > 1  // as Ultralytics: one class has one label
    var candidates = [RawDetection]()
    for i in 0..<a where best[i] > config.confidenceThreshold && (multiLabel || admits(Int(bestClass[i]))) {
        let cx = prediction.scalars[i], cy = prediction.scalars[a + i]
        let w = prediction.scalars[2 * a + i], h = prediction.scalars[3 * a + i]
        let box = rotated ? SIMD4(cx, cy, w, h) : SIMD4(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2)
        let values = (0..<extra).map { prediction.scalars[(4 + nc + $0) * a + i] }
        if multiLabel {
            for c in 0..<nc where admits(c) {
                let score = prediction.scalars[(4 + c) * a + i]
                if score > config.confidenceThreshold { candidates.append(RawDetection(box: box, score: score, cls: c, extra: values)) }
            }
        } else {
            candidates.append(RawDetection(box: box, score: best[i], cls: Int(bestClass[i]), extra: values))
        }
    }
    // Stable sort: equal scores keep anchor order.
    candidates = Array(candidates.enumerated().sorted {
        $0.element.score > $1.element.score || ($0.element.score == $1.element.score && $0.offset < $1.offset)
    }.map(\.element).prefix(30_000))
    let offsets = candidates.map { config.agnosticNMS ? 0 : Float($0.cls) * 7680 }
    let keep: [Int]
    if rotated {
        let boxes = zip(candidates, offsets).map { d, o in
            RotatedBox(cx: d.box[0] + o, cy: d.box[1] + o, w: d.box[2], h: d.box[3], angle: d.extra.last ?? 0)
        }
        keep = fastRotatedNMS(boxes, iouThreshold: config.iouThreshold, limit: config.maxDetections)
    } else {
        keep = greedyNMS(candidates.map(\.box), offsets: offsets, iouThreshold: config.iouThreshold, limit: config.maxDetections)
    }
    return keep.map { candidates[$0] }
}

extension YOLOConfiguration {
    /// Whether a class passes `classes` and `excludedClasses`, applied before NMS as Ultralytics
    /// applies `classes`.
    var classFilter: (Int) -> Bool {
        let allowed = classes.map(Set.init), excluded = excludedClasses
        return { (allowed?.contains($0) ?? true) && !excluded.contains($0) }
    }
}

/// `classPriority` on NMS's output: in order of priority (then score), a box goes when a kept box
/// of another class with a higher priority overlaps it by more than `overlapThreshold` (IoU, or
/// probabilistic IoU for rotated boxes). The kept boxes stay in their order.
package func suppressByPriority(_ detections: [RawDetection], _ config: YOLOConfiguration, rotated: Bool) -> [RawDetection] {
    guard !config.classPriority.isEmpty, detections.count > 1 else { return detections }
    let n = detections.count, priorities = detections.map { config.classPriority[$0.cls] ?? 0 }
    let overlaps: [Float]
    if rotated {
        let boxes = detections.map { RotatedBox(cx: $0.box[0], cy: $0.box[1], w: $0.box[2], h: $0.box[3], angle: $0.extra.last ?? 0) }
        overlaps = boxes.flatMap { p in boxes.map { probIoU(p, $0) } }
    } else {
        overlaps = pairwiseIoU(detections.map(\.box), detections.map(\.box))
    }
    let order = detections.indices.sorted { priorities[$0] > priorities[$1] || (priorities[$0] == priorities[$1] && $0 < $1) }
    var kept = [Int]()
    for i in order where !kept.contains(where: { j in
        detections[j].cls != detections[i].cls && priorities[j] > priorities[i] && overlaps[j * n + i] > config.overlapThreshold
    }) {
        kept.append(i)
    }
    return kept.sorted().map { detections[$0] }
}

/// A rotated box in the form probabilistic IoU takes: centre, size, angle in radians.
package struct RotatedBox: Sendable, Equatable {
    package var cx, cy, w, h, angle: Float

    package init(cx: Float, cy: Float, w: Float, h: Float, angle: Float) {
        (self.cx, self.cy, self.w, self.h, self.angle) = (cx, cy, w, h, angle)
    }

    /// Ultralytics `_get_covariance_matrix`: the box as a Gaussian, [[a, c], [c, b]].
    fileprivate var covariance: (a: Float, b: Float, c: Float) {
        let a = w * w / 12, b = h * h / 12
        let cosine = Foundation.cos(angle), sine = Foundation.sin(angle)
        let cos2 = cosine * cosine, sin2 = sine * sine
        return (a * cos2 + b * sin2, a * sin2 + b * cos2, (a - b) * cosine * sine)
    }
}

/// Ultralytics `batch_probiou` for one pair: 1 − the Hellinger distance between the boxes'
/// Gaussians (Bhattacharyya distance clamped to [eps, 100]), in Float32 as PyTorch computes it.
package func probIoU(_ p: RotatedBox, _ q: RotatedBox) -> Float {
    let eps: Float = 1e-7
    let (a1, b1, c1) = p.covariance, (a2, b2, c2) = q.covariance
    let a = a1 + a2, b = b1 + b2, c = c1 + c2
    let dx = p.cx - q.cx, dy = p.cy - q.cy
    let denominator = a * b - c * c + eps
    let t1 = (a * dy * dy + b * dx * dx) / denominator * 0.25
    let t2 = (c * (q.cx - p.cx) * dy) / denominator * 0.5
    let t3 = Foundation.log((a * b - c * c) / (4 * (max(a1 * b1 - c1 * c1, 0) * max(a2 * b2 - c2 * c2, 0)).squareRoot() + eps) + eps) * 0.5
    let bd = min(max(t1 + t2 + t3, eps), 100)
    let hd = (1 - Foundation.exp(-bd) + eps).squareRoot()
    return 1 - hd
}

/// Ultralytics `TorchNMS.fast_nms` with `batch_probiou`, over boxes sorted by descending
/// score: a box is dropped when any earlier box — kept or not — overlaps it by more than the
/// threshold (Fast-NMS, unlike greedy NMS). Returns kept indices in order, at most `limit`.
package func fastRotatedNMS(_ boxes: [RotatedBox], iouThreshold: Float, limit: Int) -> [Int] {
    var keep = [Int]()
    for j in boxes.indices {
        var suppressed = false
        for i in 0..<j where probIoU(boxes[i], boxes[j]) > iouThreshold {
            suppressed = true
            break
        }
        if !suppressed {
            keep.append(j)
            if keep.count == limit { break }
        }
    }
    return keep
}

/// Greedy NMS over boxes sorted by descending score: keep a box, drop every later box whose
/// IoU with it exceeds the threshold (torchvision `nms`). Boxes are xyxy; `offsets` shift each
/// box diagonally (class-aware NMS). Returns kept indices in order, at most `limit`. The IoU of
/// a kept box against the others runs 16 boxes at a time over structure-of-arrays storage.
package func greedyNMS(_ boxes: [SIMD4<Float>], offsets: [Float], iouThreshold: Float, limit: Int) -> [Int] {
    let n = boxes.count
    let padded = (n + 15) / 16 * 16
    // Rows: x1, y1, x2, y2, area; padding lanes are empty boxes that never overlap.
    var soa = [Float](repeating: 0, count: 5 * padded)
    for i in 0..<n {
        let b = boxes[i] + offsets[i]
        for r in 0..<4 { soa[r * padded + i] = b[r] }
        soa[4 * padded + i] = (b[2] - b[0]) * (b[3] - b[1])
    }
    var suppressed = [Bool](repeating: false, count: padded)
    var keep = [Int]()
    soa.withUnsafeBufferPointer { buffer in
        let p = buffer.baseAddress!
        func row(_ r: Int, _ j: Int) -> SIMD16<Float> {
            UnsafeRawPointer(p + r * padded + j).loadUnaligned(as: SIMD16<Float>.self)
        }
        let threshold = SIMD16<Float>(repeating: iouThreshold)
        for i in 0..<n where !suppressed[i] {
            keep.append(i)
            if keep.count == limit { break }
            let bx1 = SIMD16(repeating: p[i]), by1 = SIMD16(repeating: p[padded + i])
            let bx2 = SIMD16(repeating: p[2 * padded + i]), by2 = SIMD16(repeating: p[3 * padded + i])
            let area = SIMD16(repeating: p[4 * padded + i])
            var j = (i + 1) / 16 * 16
            while j < n {
                let w = pointwiseMax(pointwiseMin(row(2, j), bx2) - pointwiseMax(row(0, j), bx1), .zero)
                let h = pointwiseMax(pointwiseMin(row(3, j), by2) - pointwiseMax(row(1, j), by1), .zero)
                let inter = w * h
                let over = inter / (area + row(4, j) - inter) .> threshold
                if any(over) {
                    for lane in 0..<16 where over[lane] && j + lane > i { suppressed[j + lane] = true }
                }
                j += 16
            }
        }
    }
    return keep
}

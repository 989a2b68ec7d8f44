import Tensor

/// A detection in network-input pixels, before mapping back to the original image.
package struct RawDetection: Sendable, Equatable {
    package var box: SIMD4<Float>  // x1, y1, x2, y2
    package var score: Float
    package var cls: Int
}

/// End-to-end heads (YOLO26) already rank their top-k: keep rows above the confidence and in
/// the class filter, in order, up to `maxDetections` (Ultralytics `non_max_suppression`
/// with `end2end`). rows: [1, k, 6] of (x1, y1, x2, y2, score, class).
package func selectEndToEnd(_ rows: Tensor, _ config: YOLOConfiguration) -> [RawDetection] {
    let k = rows.shape[1], width = rows.shape[2]
    let allowed = config.classes.map(Set.init)
    var kept = [RawDetection]()
    for i in 0..<k where kept.count < config.maxDetections {
        let r = rows.scalars[(i * width)..<(i * width + 6)].map { $0 }
        let cls = Int(r[5])
        guard r[4] > config.confidence, allowed?.contains(cls) ?? true else { continue }
        kept.append(RawDetection(box: SIMD4(r[0], r[1], r[2], r[3]), score: r[4], cls: cls))
    }
    return kept
}

/// Ultralytics `non_max_suppression` for one-to-many heads: best class per anchor above the
/// confidence, class filter, the 30 000 most confident, then greedy NMS per class (boxes
/// offset by class × 7680) or across classes, up to `maxDetections`.
/// prediction: [1, 4 + nc, A] of (cx, cy, w, h, class probabilities…).
package func nonMaxSuppression(_ prediction: Tensor, _ config: YOLOConfiguration) -> [RawDetection] {
    let a = prediction.shape[2], nc = prediction.shape[1] - 4
    var best = [Float](repeating: -.infinity, count: a), bestClass = [Int32](repeating: 0, count: a)
    prediction.scalars.withUnsafeBufferPointer { p in
        best.withUnsafeMutableBufferPointer { b in
            bestClass.withUnsafeMutableBufferPointer { bc in
                bestClassPerAnchor(p.baseAddress! + 4 * a, classes: nc, anchors: a, b.baseAddress!, bc.baseAddress!)
            }
        }
    }
    let allowed = config.classes.map(Set.init)
    var candidates = [RawDetection]()
    for i in 0..<a where best[i] > config.confidence && (allowed?.contains(Int(bestClass[i])) ?? true) {
        let cx = prediction.scalars[i], cy = prediction.scalars[a + i]
        let w = prediction.scalars[2 * a + i], h = prediction.scalars[3 * a + i]
        candidates.append(RawDetection(box: SIMD4(cx - w / 2, cy - h / 2, cx + w / 2, cy + h / 2),
                                       score: best[i], cls: Int(bestClass[i])))
    }
    // Stable sort: equal scores keep anchor order.
    candidates = Array(candidates.enumerated().sorted {
        $0.element.score > $1.element.score || ($0.element.score == $1.element.score && $0.offset < $1.offset)
    }.map(\.element).prefix(30_000))
    let offsets = candidates.map { config.agnosticNMS ? 0 : Float($0.cls) * 7680 }
    let keep = greedyNMS(candidates.map(\.box), offsets: offsets, iouThreshold: config.iou, limit: config.maxDetections)
    return keep.map { candidates[$0] }
}

/// For each anchor, the largest of `classes` rows and its index (the first on ties).
/// probs: [classes, anchors] row-major. Runs 16 anchors at a time.
package func bestClassPerAnchor(_ probs: UnsafePointer<Float>, classes: Int, anchors: Int,
                        _ best: UnsafeMutablePointer<Float>, _ bestClass: UnsafeMutablePointer<Int32>) {
    var i = 0
    while i + 16 <= anchors {
        var m = SIMD16<Float>(repeating: -.infinity), idx = SIMD16<Int32>(repeating: 0)
        for c in 0..<classes {
            let v = UnsafeRawPointer(probs + c * anchors + i).loadUnaligned(as: SIMD16<Float>.self)
            let greater = v .> m
            m.replace(with: v, where: greater)
            idx.replace(with: SIMD16(repeating: Int32(c)), where: greater)
        }
        UnsafeMutableRawPointer(best + i).storeBytes(of: m, as: SIMD16<Float>.self)
        UnsafeMutableRawPointer(bestClass + i).storeBytes(of: idx, as: SIMD16<Int32>.self)
        i += 16
    }
    for j in i..<anchors {
        var m = -Float.infinity, idx: Int32 = 0
        for c in 0..<classes where probs[c * anchors + j] > m {
            m = probs[c * anchors + j]
            idx = Int32(c)
        }
        best[j] = m
        bestClass[j] = idx
    }
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

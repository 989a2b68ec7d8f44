import Tensor

/// What a detection head produces for one image.
package struct DetectOutput: Sendable {
    /// End-to-end heads: [1, k, 6] rows of (x1, y1, x2, y2, score, class) in input pixels,
    /// sorted by score, k = min(maxDetections, anchors). Other heads: [1, 4 + nc, anchors]
    /// rows of (cx, cy, w, h) then class probabilities.
    package let output: Tensor
    /// Box regression before decoding: [1, 4 · regMax, anchors].
    package let boxes: Tensor
    /// Class logits before the sigmoid: [1, nc, anchors].
    package let scores: Tensor
}

/// Ultralytics `Detect`: per level a box branch (Conv 3×3, Conv 3×3, Conv2d 1×1 → 4·regMax)
/// and a class branch (DWConv 3×3, Conv 1×1, twice, then Conv2d 1×1 → nc; or Conv 3×3 twice in
/// legacy models), decoded against anchor centres. YOLO26: regMax 1 and an end-to-end
/// top-k; YOLO11: a 16-bin DFL and the dense output that NMS consumes.
struct Detect: Sendable {
    let nc: Int, regMax: Int
    let endToEnd: Bool
    let box: [[Conv]], cls: [[Conv]]
    /// DFL bin weights (0, 1, …, regMax − 1 in every Ultralytics model).
    let dfl: [Float]
    let maxDetections = 300

    init(_ w: inout some WeightSource, _ p: String, nc: Int, regMax: Int, endToEnd: Bool, legacy: Bool,
         channels: [Int]) throws {
        (self.nc, self.regMax, self.endToEnd) = (nc, regMax, endToEnd)
        let c2 = max(16, channels[0] / 4, regMax * 4), c3 = max(channels[0], min(nc, 100))
        func branches(_ boxName: String, _ clsName: String) throws -> ([[Conv]], [[Conv]]) {
            let box = try channels.enumerated().map { i, c in
                let q = "\(p).\(boxName).\(i)"
                return [try Conv(&w, q + ".0", c, c2, k: 3), try Conv(&w, q + ".1", c2, c2, k: 3),
                        try Conv(&w, q + ".2", c2, 4 * regMax, plain: true)]
            }
            let cls = try channels.enumerated().map { i, c in
                let q = "\(p).\(clsName).\(i)"
                if legacy {
                    return [try Conv(&w, q + ".0", c, c3, k: 3), try Conv(&w, q + ".1", c3, c3, k: 3),
                            try Conv(&w, q + ".2", c3, nc, plain: true)]
                }
                return [try Conv.depthwise(&w, q + ".0.0", c, c, k: 3), try Conv(&w, q + ".0.1", c, c3),
                        try Conv.depthwise(&w, q + ".1.0", c3, c3, k: 3), try Conv(&w, q + ".1.1", c3, c3),
                        try Conv(&w, q + ".2", c3, nc, plain: true)]
            }
            return (box, cls)
        }
        // The inference head is the one-to-one branch of end-to-end models. The other branch,
        // present in unfused checkpoints, is bound (so its shapes are checked) and dropped.
        if endToEnd {
            (box, cls) = try branches("one2one_cv2", "one2one_cv3")
            if w.contains(prefix: p + ".cv2") { _ = try branches("cv2", "cv3") }
        } else {
            (box, cls) = try branches("cv2", "cv3")
        }
        dfl = regMax > 1 ? try w.tensor(p + ".dfl.conv.weight", shape: [1, regMax, 1, 1]).scalars : []
    }

    /// features: one [1, C_i, H_i, W_i] map per level; `strides` the input-to-map ratio of each.
    func callAsFunction(_ features: [Tensor], strides: [Int]) -> DetectOutput {
        var boxMaps = [Tensor](), clsMaps = [Tensor]()
        for (i, x) in features.enumerated() {
            let plane = x.shape[2] * x.shape[3]
            boxMaps.append(box[i].reduce(x) { $1($0) }.reshaped([4 * regMax, plane]))
            clsMaps.append(cls[i].reduce(x) { $1($0) }.reshaped([nc, plane]))
        }
        let boxes = concat(boxMaps, axis: 1), scores = concat(clsMaps, axis: 1)
        let anchors = boxes.shape[1]
        let decoded = decode(boxes, features: features, strides: strides)  // [4, A]
        let probs = activated(scores, .sigmoid)
        let output = endToEnd ? topK(decoded, probs) : concat([decoded, probs], axis: 0).reshaped([1, 4 + nc, anchors])
        return DetectOutput(output: output, boxes: boxes.reshaped([1, 4 * regMax, anchors]),
                            scores: scores.reshaped([1, nc, anchors]))
    }

    /// Distances (left, top, right, bottom) from each anchor centre → boxes in input pixels:
    /// xyxy for end-to-end heads, xywh otherwise. boxes: [4 · regMax, A] → [4, A].
    private func decode(_ boxes: Tensor, features: [Tensor], strides: [Int]) -> Tensor {
        let a = boxes.shape[1]
        var out = Tensor(zeros: [4, a])
        var anchor = 0
        for (level, x) in features.enumerated() {
            let s = Float(strides[level])
            for gy in 0..<x.shape[2] {
                for gx in 0..<x.shape[3] {
                    let l = distance(boxes, side: 0, anchor: anchor, count: a)
                    let t = distance(boxes, side: 1, anchor: anchor, count: a)
                    let r = distance(boxes, side: 2, anchor: anchor, count: a)
                    let b = distance(boxes, side: 3, anchor: anchor, count: a)
                    let ax = Float(gx) + 0.5, ay = Float(gy) + 0.5
                    let x1 = ax - l, y1 = ay - t, x2 = ax + r, y2 = ay + b
                    if endToEnd {
                        out.scalars[anchor] = x1 * s
                        out.scalars[a + anchor] = y1 * s
                        out.scalars[2 * a + anchor] = x2 * s
                        out.scalars[3 * a + anchor] = y2 * s
                    } else {
                        out.scalars[anchor] = (x1 + x2) / 2 * s
                        out.scalars[a + anchor] = (y1 + y2) / 2 * s
                        out.scalars[2 * a + anchor] = (x2 - x1) * s
                        out.scalars[3 * a + anchor] = (y2 - y1) * s
                    }
                    anchor += 1
                }
            }
        }
        return out
    }

    /// One side's distance: the raw value when regMax is 1, else the DFL expectation
    /// Σ softmax(bins)ᵢ · dflᵢ over the side's regMax bins.
    private func distance(_ boxes: Tensor, side: Int, anchor: Int, count: Int) -> Float {
        if regMax == 1 { return boxes.scalars[side * count + anchor] }
        var bins = (0..<regMax).map { boxes.scalars[(side * regMax + $0) * count + anchor] }
        bins.withUnsafeMutableBufferPointer { softmaxRow($0.baseAddress!, count: regMax) }
        return zip(bins, dfl).reduce(0) { $0 + $1.0 * $1.1 }
    }

    /// Ultralytics `Detect.postprocess`: the k anchors with the best class score, then the k
    /// best (anchor, class) pairs among them. decoded: [4, A], probs: [nc, A] → [1, k, 6].
    private func topK(_ decoded: Tensor, _ probs: Tensor) -> Tensor {
        let a = decoded.shape[1], k = min(maxDetections, a)
        var best = [Float](repeating: -.infinity, count: a)
        for c in 0..<nc {
            for i in 0..<a { best[i] = max(best[i], probs.scalars[c * a + i]) }
        }
        let anchors = topIndices(best, k)
        var candidates = [Float](repeating: 0, count: k * nc)
        for (j, i) in anchors.enumerated() {
            for c in 0..<nc { candidates[j * nc + c] = probs.scalars[c * a + i] }
        }
        var rows = [Float]()
        rows.reserveCapacity(k * 6)
        for flat in topIndices(candidates, k) {
            let i = anchors[flat / nc]
            rows += (0..<4).map { decoded.scalars[$0 * a + i] }
            rows += [candidates[flat], Float(flat % nc)]
        }
        return Tensor(shape: [1, k, 6], scalars: rows)
    }
}

/// Indices of the `k` largest values, largest first; ties keep the lower index first.
///
/// (value descending, index ascending) is a strict total order on the indices, so a
/// quickselect of the first k followed by a sort of those k gives exactly the prefix of the
/// full sort, in O(n + k log k) instead of O(n log n).
package func topIndices(_ values: [Float], _ k: Int) -> [Int] {
    let k = min(max(k, 0), values.count)
    guard k > 0 else { return [] }
    var order = Array(values.indices)
    values.withUnsafeBufferPointer { v in
        order.withUnsafeMutableBufferPointer { o in
            func before(_ i: Int, _ j: Int) -> Bool { v[i] > v[j] || (v[i] == v[j] && i < j) }
            var lo = 0, hi = o.count - 1
            // Invariant: the k first of the order lie in o[0..<k], and o[lo...hi] holds the undecided ones.
            while lo < hi {
                let mid = lo + (hi - lo) / 2
                // Median of three as the pivot, moved to o[hi].
                if before(o[mid], o[lo]) { o.swapAt(mid, lo) }
                if before(o[hi], o[lo]) { o.swapAt(hi, lo) }
                if before(o[mid], o[hi]) { o.swapAt(mid, hi) }
                let pivot = o[hi]
                var store = lo
                for i in lo..<hi where before(o[i], pivot) {
                    o.swapAt(i, store)
                    store += 1
                }
                o.swapAt(store, hi)
                if store == k - 1 || store == k { break }
                if store < k { lo = store + 1 } else { hi = store - 1 }
            }
            var head = Array(o[0..<k])
            head.sort(by: before)
            for i in 0..<k { o[i] = head[i] }
        }
    }
    return Array(order.prefix(k))
}

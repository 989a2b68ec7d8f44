import Foundation
import Tensor

/// What a head produces for one image.
package struct HeadOutput: Sendable {
    /// The inference output, as Ultralytics' head returns it:
    /// - detect, end-to-end: [1, k, 6] rows of (x1, y1, x2, y2, score, class) in input pixels,
    ///   sorted by score, k = min(300, anchors); segment adds 32 mask coefficients per row, pose
    ///   adds (x, y, visibility) per keypoint in input pixels, obb is (cx, cy, w, h, score,
    ///   class, angle in radians).
    /// - detect, one-to-many (legacy): [1, 4 + nc, anchors] rows of (cx, cy, w, h) then class
    ///   probabilities.
    /// - classify: [1, nc] probabilities.
    package let output: Tensor
    /// Segmentation prototypes [1, 32, H/4, W/4].
    package let protos: Tensor?
    /// The head's maps before decoding, named like the reference files' `output.1.*`:
    /// "boxes" [1, 4 · regMax, anchors], "scores" (class logits) [1, nc, anchors], and per task
    /// "mask_coefficient", "kpts" or "angle".
    package let raw: [String: Tensor]
}

/// How an end-to-end head picks its detections (Ultralytics sets these on the head from the
/// predict arguments).
package struct HeadSelection: Sendable, Equatable {
    /// Rows kept by the top-k: Ultralytics uses max(max_det, 300).
    package var maxDetections = 300
    /// One row per anchor (its best class) instead of the best (anchor, class) pairs.
    package var agnostic = false

    package init(maxDetections: Int = 300, agnostic: Bool = false) {
        self.maxDetections = maxDetections
        self.agnostic = agnostic
    }
}

/// What a head adds per anchor to Detect's boxes and classes.
enum HeadTask: Sendable, Equatable {
    case detect
    /// Segment26: mask coefficients per anchor, and prototype masks from Proto26.
    case segment(masks: Int, protoChannels: Int)
    /// Pose26: `keypoints` × `dims` values per anchor (x, y[, visibility]).
    case pose(keypoints: Int, dims: Int)
    /// OBB26: `extras` angle values per anchor (radians, unbounded).
    case obb(extras: Int)

    /// Values per anchor after the box and the class scores.
    var extraChannels: Int {
        switch self {
        case .detect: 0
        case .segment(let masks, _): masks
        case .pose(let keypoints, let dims): keypoints * dims
        case .obb(let extras): extras
        }
    }

    /// Name of the extra map in the reference files' `output.1.*`.
    var extraName: String {
        switch self {
        case .detect: ""
        case .segment: "mask_coefficient"
        case .pose: "kpts"
        case .obb: "angle"
        }
    }
}

/// Ultralytics `Detect` and its YOLO26 task heads (`Segment26`, `Pose26`, `OBB26`): per level a
/// box branch (Conv 3×3, Conv 3×3, Conv2d 1×1 → 4·regMax), a class branch (DWConv 3×3, Conv 1×1,
/// twice, then Conv2d 1×1 → nc; or Conv 3×3 twice in legacy models) and the task's extra
/// branch, decoded against anchor centres. YOLO26: regMax 1 and an end-to-end top-k; YOLO11:
/// a 16-bin DFL and the dense output that NMS consumes.
struct Detect: Sendable {
    let nc: Int, regMax: Int
    let endToEnd: Bool
    let task: HeadTask
    let box: [[Conv]], cls: [[Conv]], extra: [[Conv]]
    let proto: Proto26?
    /// DFL bin weights (0, 1, …, regMax − 1 in every Ultralytics model).
    let dfl: [Float]

    init(_ w: inout some WeightSource, _ p: String, nc: Int, regMax: Int, endToEnd: Bool, legacy: Bool,
         task: HeadTask, channels: [Int]) throws {
        (self.nc, self.regMax, self.endToEnd, self.task) = (nc, regMax, endToEnd, task)
        let c2 = max(16, channels[0] / 4, regMax * 4), c3 = max(channels[0], min(nc, 100))
        /// The box, class and extra branches of one head ("one2one_" or "").
        func branches(_ prefix: String) throws -> ([[Conv]], [[Conv]], [[Conv]]) {
            let box = try channels.enumerated().map { i, c in
                let q = "\(p).\(prefix)cv2.\(i)"
                return [try Conv(&w, q + ".0", c, c2, k: 3), try Conv(&w, q + ".1", c2, c2, k: 3),
                        try Conv(&w, q + ".2", c2, 4 * regMax, plain: true)]
            }
            let cls = try channels.enumerated().map { i, c in
                let q = "\(p).\(prefix)cv3.\(i)"
                if legacy {
                    return [try Conv(&w, q + ".0", c, c3, k: 3), try Conv(&w, q + ".1", c3, c3, k: 3),
                            try Conv(&w, q + ".2", c3, nc, plain: true)]
                }
                return [try Conv.depthwise(&w, q + ".0.0", c, c, k: 3), try Conv(&w, q + ".0.1", c, c3),
                        try Conv.depthwise(&w, q + ".1.0", c3, c3, k: 3), try Conv(&w, q + ".1.1", c3, c3),
                        try Conv(&w, q + ".2", c3, nc, plain: true)]
            }
            let extra = try channels.enumerated().map { i, c -> [Conv] in
                let q = "\(p).\(prefix)cv4.\(i)"
                switch task {
                case .detect:
                    return []
                case .segment(let masks, _), .obb(let masks):
                    let c4 = max(channels[0] / 4, masks)
                    return [try Conv(&w, q + ".0", c, c4, k: 3), try Conv(&w, q + ".1", c4, c4, k: 3),
                            try Conv(&w, q + ".2", c4, masks, plain: true)]
                case .pose(let keypoints, let dims):
                    let c4 = max(channels[0] / 4, keypoints * (dims + 2))
                    // Pose26 splits the last conv off as cv4_kpts; cv4_sigma and the flow model
                    // only train.
                    w.discard(prefix: "\(p).\(prefix)cv4_sigma.\(i)")
                    return [try Conv(&w, q + ".0", c, c4, k: 3), try Conv(&w, q + ".1", c4, c4, k: 3),
                            try Conv(&w, "\(p).\(prefix)cv4_kpts.\(i)", c4, keypoints * dims, plain: true)]
                }
            }
            return (box, cls, extra)
        }
        // The inference head is the one-to-one branch of end-to-end models. The other branch,
        // present in unfused checkpoints, is bound (so its shapes are checked) and dropped.
        if endToEnd {
            (box, cls, extra) = try branches("one2one_")
            if w.contains(prefix: p + ".cv2") { _ = try branches("") }
        } else {
            (box, cls, extra) = try branches("")
        }
        w.discard(prefix: p + ".flow_model")
        if case .segment(let masks, let protoChannels) = task {
            proto = try Proto26(&w, p + ".proto", channels: channels, hidden: protoChannels, masks: masks)
        } else {
            proto = nil
        }
        dfl = regMax > 1 ? try w.tensor(p + ".dfl.conv.weight", shape: [1, regMax, 1, 1]).scalars : []
    }

    /// features: one [1, C_i, H_i, W_i] map per level; `strides` the input-to-map ratio of each.
    func callAsFunction(_ features: [Tensor], strides: [Int], selection: HeadSelection) -> HeadOutput {
        var boxMaps = [Tensor](), clsMaps = [Tensor](), extraMaps = [Tensor]()
        let e = task.extraChannels
        for (i, x) in features.enumerated() {
            let plane = x.shape[2] * x.shape[3]
            boxMaps.append(box[i].reduce(x) { $1($0) }.reshaped([4 * regMax, plane]))
            clsMaps.append(cls[i].reduce(x) { $1($0) }.reshaped([nc, plane]))
            if e > 0 { extraMaps.append(extra[i].reduce(x) { $1($0) }.reshaped([e, plane])) }
        }
        let boxes = concat(boxMaps, axis: 1), scores = concat(clsMaps, axis: 1)
        let extras = e > 0 ? concat(extraMaps, axis: 1) : nil
        let anchors = boxes.shape[1]
        var decoded = decode(boxes, angles: extras.flatMap { task.extraName == "angle" ? $0 : nil },
                             features: features, strides: strides)  // [4, A]
        if let extras {
            decoded = concat([decoded, task.extraName == "kpts" ? decodeKeypoints(extras, features: features, strides: strides)
                                                                 : extras], axis: 0)
        }
        let probs = activated(scores, .sigmoid)
        let output: Tensor
        if endToEnd {
            output = topK(decoded, probs, selection)
        } else {
            // Ultralytics' order: box, class probabilities, then the task's extras.
            let parts = split(decoded, sizes: [4, e], axis: 0)
            output = concat([parts[0], probs, parts[1]], axis: 0).reshaped([1, 4 + nc + e, anchors])
        }
        var raw = ["boxes": boxes.reshaped([1, 4 * regMax, anchors]), "scores": scores.reshaped([1, nc, anchors])]
        if let extras { raw[task.extraName] = extras.reshaped([1, e, anchors]) }
        return HeadOutput(output: output, protos: proto.map { $0(features) }, raw: raw)
    }

    /// Distances (left, top, right, bottom) from each anchor centre → boxes in input pixels:
    /// xyxy for end-to-end heads, xywh otherwise; with `angles`, rotated xywh (Ultralytics
    /// `dist2rbox`). boxes: [4 · regMax, A] → [4, A].
    private func decode(_ boxes: Tensor, angles: Tensor?, features: [Tensor], strides: [Int]) -> Tensor {
        let a = boxes.shape[1], d = distances(boxes).scalars
        var out = Tensor(zeros: [4, a])
        var anchor = 0
        for (level, x) in features.enumerated() {
            let s = Float(strides[level])
            for gy in 0..<x.shape[2] {
                for gx in 0..<x.shape[3] {
                    let (l, t, r, b) = (d[anchor], d[a + anchor], d[2 * a + anchor], d[3 * a + anchor])
                    let ax = Float(gx) + 0.5, ay = Float(gy) + 0.5
                    let values: (Float, Float, Float, Float)
                    if let angles {
                        let theta = angles.scalars[anchor], cosine = Foundation.cos(theta), sine = Foundation.sin(theta)
                        let xf = (r - l) / 2, yf = (b - t) / 2
                        values = (xf * cosine - yf * sine + ax, xf * sine + yf * cosine + ay, l + r, t + b)
                    } else {
                        let x1 = ax - l, y1 = ay - t, x2 = ax + r, y2 = ay + b
                        values = endToEnd ? (x1, y1, x2, y2) : ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)
                    }
                    out.scalars[anchor] = values.0 * s
                    out.scalars[a + anchor] = values.1 * s
                    out.scalars[2 * a + anchor] = values.2 * s
                    out.scalars[3 * a + anchor] = values.3 * s
                    anchor += 1
                }
            }
        }
        return out
    }

    /// Pose26 keypoints: x, y offsets from the anchor centre in cells → input pixels; the
    /// visibility logit → probability. kpts: [K · dims, A].
    private func decodeKeypoints(_ kpts: Tensor, features: [Tensor], strides: [Int]) -> Tensor {
        guard case .pose(let keypoints, let dims) = task else { return kpts }
        let a = kpts.shape[1]
        var out = kpts
        var anchor = 0
        for (level, x) in features.enumerated() {
            let s = Float(strides[level])
            for gy in 0..<x.shape[2] {
                for gx in 0..<x.shape[3] {
                    for k in 0..<keypoints {
                        let row = k * dims
                        out.scalars[row * a + anchor] = (kpts.scalars[row * a + anchor] + Float(gx) + 0.5) * s
                        out.scalars[(row + 1) * a + anchor] = (kpts.scalars[(row + 1) * a + anchor] + Float(gy) + 0.5) * s
                    }
                    anchor += 1
                }
            }
        }
        if dims == 3 {
            out.scalars.withUnsafeMutableBufferPointer { p in
                for k in 0..<keypoints {
                    let row = p.baseAddress! + (k * 3 + 2) * a
                    applyActivation(.sigmoid, row, row, count: a)
                }
            }
        }
        return out
    }

    /// One side's distance: the raw value when regMax is 1, else the DFL expectation
    /// Σ softmax(bins)ᵢ · dflᵢ over the side's regMax bins.
    /// Ultralytics `DFL`: each side's distance as the expectation of its `regMax` bins under a
    /// softmax over them. boxes: [4 · regMax, A] → [4, A].
    private func distances(_ boxes: Tensor) -> Tensor {
        guard regMax > 1 else { return boxes }
        let a = boxes.shape[1]
        let p = softmax(boxes.reshaped([4, regMax, a]), axis: 1)
        var d = [Float](repeating: 0, count: 4 * a)
        for side in 0..<4 {
            for k in 0..<regMax {
                let w = dfl[k], row = (side * regMax + k) * a
                for i in 0..<a { d[side * a + i] += p.scalars[row + i] * w }
            }
        }
        return Tensor(shape: [4, a], scalars: d)
    }

    /// Ultralytics `Detect.postprocess`: the k anchors with the best class score, then the k
    /// best (anchor, class) pairs among them; with `agnostic`, the k best anchors with their
    /// best class each. decoded: [4 + E, A], probs: [nc, A] → [1, k, 6 + E] rows of
    /// (box, score, class, extras).
    private func topK(_ decoded: Tensor, _ probs: Tensor, _ selection: HeadSelection) -> Tensor {
        let a = decoded.shape[1], k = min(selection.maxDetections, a), e = decoded.shape[0] - 4
        // Each anchor's best class (the first on ties), 16 anchors at a time.
        var best = [Float](repeating: -.infinity, count: a), label = [Int32](repeating: 0, count: a)
        probs.scalars.withUnsafeBufferPointer { p in
            best.withUnsafeMutableBufferPointer { b in
                label.withUnsafeMutableBufferPointer { l in
                    var i = 0
                    while i + 16 <= a {
                        var m = SIMD16<Float>(repeating: -.infinity), arg = SIMD16<Int32>(repeating: 0)
                        for c in 0..<nc {
                            let v = UnsafeRawPointer(p.baseAddress! + c * a + i).loadUnaligned(as: SIMD16<Float>.self)
                            let better = v .> m
                            m.replace(with: v, where: better)
                            arg.replace(with: Int32(c), where: better)
                        }
                        UnsafeMutableRawPointer(b.baseAddress! + i).storeBytes(of: m, as: SIMD16<Float>.self)
                        UnsafeMutableRawPointer(l.baseAddress! + i).storeBytes(of: arg, as: SIMD16<Int32>.self)
                        i += 16
                    }
                    for c in 0..<nc {
                        for j in i..<a where p[c * a + j] > b[j] { (b[j], l[j]) = (p[c * a + j], Int32(c)) }
                    }
                }
            }
        }
        let anchors = topIndices(best, k)
        /// Rows of (box, score, class, extras) for anchors `i`.
        func rows(_ picks: [(anchor: Int, score: Float, label: Int)]) -> Tensor {
            var rows = [Float]()
            rows.reserveCapacity(k * (6 + e))
            for (i, score, label) in picks {
                for r in 0..<4 { rows.append(decoded.scalars[r * a + i]) }
                rows.append(score)
                rows.append(Float(label))
                for r in 0..<e { rows.append(decoded.scalars[(4 + r) * a + i]) }
            }
            return Tensor(shape: [1, k, 6 + e], scalars: rows)
        }
        if selection.agnostic {
            return rows(anchors.map { ($0, best[$0], Int(label[$0])) })
        }
        var candidates = [Float](repeating: 0, count: k * nc)
        for (j, i) in anchors.enumerated() {
            for c in 0..<nc { candidates[j * nc + c] = probs.scalars[c * a + i] }
        }
        return rows(topIndices(candidates, k).map { (anchors[$0 / nc], candidates[$0], $0 % nc) })
    }
}

/// Ultralytics `Proto26`: the deeper levels refined to the first level's channels (1×1),
/// upsampled (nearest) and added to it, fused (3×3), then `Proto`: Conv 3×3, a 2×2 stride-2
/// transposed conv, Conv 3×3, Conv 1×1 → `masks` prototypes at 1/4 of the input size.
/// The semantic-segmentation branch only trains.
struct Proto26: Sendable {
    let refine: [Conv]
    let fuse: Conv, cv1: Conv, cv2: Conv, cv3: Conv
    let upsampleWeight: Tensor, upsampleBias: [Float]

    init(_ w: inout some WeightSource, _ p: String, channels: [Int], hidden: Int, masks: Int) throws {
        refine = try channels.dropFirst().enumerated().map { try Conv(&w, "\(p).feat_refine.\($0)", $1, channels[0]) }
        fuse = try Conv(&w, p + ".feat_fuse", channels[0], hidden, k: 3)
        cv1 = try Conv(&w, p + ".cv1", hidden, hidden, k: 3)
        upsampleWeight = try w.tensor(p + ".upsample.weight", shape: [hidden, hidden, 2, 2])
        upsampleBias = try w.tensor(p + ".upsample.bias", shape: [hidden]).scalars
        cv2 = try Conv(&w, p + ".cv2", hidden, hidden, k: 3)
        cv3 = try Conv(&w, p + ".cv3", hidden, masks)
        w.discard(prefix: p + ".semseg")
    }

    /// features: the head's input levels → [1, masks, 2·H₀, 2·W₀].
    func callAsFunction(_ features: [Tensor]) -> Tensor {
        var feat = features[0]
        for (i, conv) in refine.enumerated() {
            feat = add(feat, upsampleNearest(conv(features[i + 1]), scale: 1 << (i + 1)))
        }
        let up = convTranspose2d(cv1(fuse(feat)), weight: upsampleWeight, bias: upsampleBias, stride: 2, padding: 0)
        return cv3(cv2(up))
    }
}

/// Ultralytics `Classify`: Conv to 1280 channels, global average pool, linear → nc, softmax.
struct Classify: Sendable {
    let conv: Conv
    let linearWeight: Tensor, linearBias: [Float]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, nc: Int, k: Int, s: Int) throws {
        conv = try Conv(&w, p + ".conv", c1, 1280, k: k, s: s)
        linearWeight = try w.tensor(p + ".linear.weight", shape: [nc, 1280])
        linearBias = try w.tensor(p + ".linear.bias", shape: [nc]).scalars
    }

    /// x: [1, C, H, W] → probabilities [1, nc] (raw "logits" [1, nc] alongside).
    func callAsFunction(_ x: Tensor) -> HeadOutput {
        let y = conv(x)
        let plane = y.shape[2] * y.shape[3]
        let pooled = Tensor(shape: [1, 1280], scalars: (0..<1280).map { c in
            y.scalars[(c * plane)..<((c + 1) * plane)].reduce(0, +) / Float(plane)
        })
        var logits = matmul(pooled.reshaped([1, 1, 1280]), linearWeight.reshaped([1, linearWeight.shape[0], 1280]),
                            transposeB: true).reshaped([1, linearWeight.shape[0]])
        for i in 0..<logits.count { logits.scalars[i] += linearBias[i] }
        return HeadOutput(output: softmax(logits), protos: nil, raw: ["logits": logits])
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

import Foundation
import Tensor

/// What a head adds per anchor to Detect's boxes and classes.
enum HeadKind: Sendable, Equatable {
    case detect
    /// Segment, Segment26: mask coefficients per anchor, and prototype masks from Proto or Proto26.
    case segment(masks: Int, protoChannels: Int)
    /// Pose, Pose26: `keypoints` × `dims` values per anchor (x, y[, visibility]).
    case pose(keypoints: Int, dims: Int)
    /// OBB, OBB26: `extras` angle values per anchor (radians).
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

    var task: ModelTask {
        switch self {
        case .detect: .detect
        case .segment: .segment
        case .pose: .pose
        case .obb: .obb
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

/// Ultralytics `Detect` and its task heads (`Segment`, `Pose`, `OBB`, their YOLO26 forms
/// `Segment26`, `Pose26`, `OBB26`, and YOLOv10's `v10Detect`): per level a box branch (Conv 3×3,
/// Conv 3×3, Conv2d 1×1 → 4·regMax), a class branch (DWConv 3×3, Conv 1×1, twice, then Conv2d
/// 1×1 → nc; or Conv 3×3 twice in legacy models) and the task's extra branch, decoded against
/// anchor centres. End-to-end heads (YOLO26, YOLOv10) rank a top-k of their one-to-one branch;
/// the others give the dense output that NMS consumes. regMax 1 (YOLO26) reads distances
/// directly, 16 a DFL.
struct Detect: Head {
    let nc: Int, regMax: Int
    let endToEnd: Bool
    let kind: HeadKind
    /// The YOLO26 task heads: Pose26's keypoint conv apart and keypoints as offsets from the
    /// anchor centre, OBB26's angle as the conv gives it, Proto26. Otherwise Ultralytics'
    /// earlier heads: keypoints as 2·offsets from the cell corner, the angle a sigmoid mapped
    /// onto [−π/4, 3π/4], Proto on the first level.
    let yolo26: Bool
    let box: [[Conv]], cls: [[Conv]], extra: [[Conv]]
    let proto: (any PrototypeBranch)?
    /// DFL bin weights (0, 1, …, regMax − 1 in every Ultralytics model).
    let dfl: [Float]
    /// Each level's input-to-map size ratio.
    let strides: [Int]

    /// A head row: [nc, …] with the task's numbers (Segment: masks, prototype channels; OBB:
    /// extra parameters; Pose reads `kpt_shape`). The weight file's `end2end` picks the branch
    /// that runs. `v10Detect` has a 16-bin DFL, the depthwise class branch and both branches
    /// whatever the model's `reg_max`, legacy rule and `end2end`.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let nc: Int, module = spec.row.module
        switch spec.args.first {
        case .string("nc"), nil: nc = spec.architecture.nc
        case let value?: guard let v = value.int, v > 0 else { throw spec.fail("nc must be a positive integer") }; nc = v
        }
        guard spec.isLast else { throw spec.fail("the \(module) head must be the last layer") }
        guard spec.from.allSatisfy({ $0 >= 0 }) else { throw spec.fail("\(module) reads layer outputs, not the input") }
        let kind: HeadKind, yolo26 = module.hasSuffix("26")
        switch module {
        case "Segment", "Segment26":
            let masks = try spec.int(1, "masks", default: 32)
            let protos = spec.scaled(try spec.int(2, "prototype channels", default: 256))
            // Proto26 upsamples level i by 2^i onto level 0.
            guard !yolo26 || spec.inputStrides.enumerated().allSatisfy({ $1 == spec.inputStrides[0] << $0 }) else {
                throw spec.fail("Segment26 needs levels whose strides double, got \(spec.inputStrides)")
            }
            kind = .segment(masks: masks, protoChannels: protos)
        case "Pose", "Pose26":
            let shape = spec.architecture.kptShape
            guard let shape, shape.count == 2, (1...1024).contains(shape[0]), (2...3).contains(shape[1]) else {
                throw spec.fail("\(module) needs kpt_shape [keypoints, 2 or 3], got \(shape.map { "\($0)" } ?? "none")")
            }
            kind = .pose(keypoints: shape[0], dims: shape[1])
        case "OBB", "OBB26":
            kind = .obb(extras: try spec.int(1, "extra parameters", default: 1))
        default:
            kind = .detect
        }
        let v10 = module == "v10Detect"
        try self.init(&w, spec.prefix, nc: nc, regMax: v10 ? 16 : spec.architecture.regMax,
                      endToEnd: spec.architecture.endToEnd, legacy: spec.legacy && !v10, kind: kind, yolo26: yolo26,
                      bothBranches: v10, channels: spec.inputChannels, strides: spec.inputStrides)
    }

    var task: ModelTask { kind.task }
    var channels: Int { nc }
    var convs: [Conv] { (box + cls + extra).flatMap { $0 } }
    var parameterCount: Int { convs.parameterCount + dfl.count + (proto?.parameterCount ?? 0) }

    /// The branches at each input level's size; the prototypes from the levels'.
    func flops(inputs levels: [Plane], output: Plane) -> Double {
        let branches = levels.indices.reduce(0.0) { sum, i in
            sum + (box[i] + cls[i] + (extra.isEmpty ? [] : extra[i])).flops(levels[i])
        }
        return branches + (proto?.flops(levels) ?? 0)
    }

    init(_ w: inout some WeightSource, _ p: String, nc: Int, regMax: Int, endToEnd: Bool, legacy: Bool,
         kind: HeadKind, yolo26: Bool, bothBranches: Bool, channels: [Int], strides: [Int]) throws {
        (self.nc, self.regMax, self.endToEnd, self.kind, self.yolo26, self.strides) = (nc, regMax, endToEnd, kind, yolo26, strides)
        let c2 = max(16, channels[0] / 4, regMax * 4), c3 = max(channels[0], min(nc, 100))
        /// Conv 3×3 c → hidden, Conv 3×3, Conv2d 1×1 → out (named `last`, else `q.2`).
        func branch(_ q: String, _ c: Int, _ hidden: Int, _ out: Int, last: String? = nil) throws -> [Conv] {
            [try Conv(&w, q + ".0", c, hidden, k: 3), try Conv(&w, q + ".1", hidden, hidden, k: 3),
             try Conv(&w, last ?? q + ".2", hidden, out, plain: true)]
        }
        /// The box, class and extra branches of one head ("one2one_" or "").
        func branches(_ prefix: String) throws -> ([[Conv]], [[Conv]], [[Conv]]) {
            let box = try channels.enumerated().map { i, c in try branch("\(p).\(prefix)cv2.\(i)", c, c2, 4 * regMax) }
            let cls = try channels.enumerated().map { i, c in
                let q = "\(p).\(prefix)cv3.\(i)"
                if legacy { return try branch(q, c, c3, nc) }
                return [try Conv.depthwise(&w, q + ".0.0", c, c, k: 3), try Conv(&w, q + ".0.1", c, c3),
                        try Conv.depthwise(&w, q + ".1.0", c3, c3, k: 3), try Conv(&w, q + ".1.1", c3, c3),
                        try Conv(&w, q + ".2", c3, nc, plain: true)]
            }
            let extra = try channels.enumerated().map { i, c -> [Conv] in
                let q = "\(p).\(prefix)cv4.\(i)", e = kind.extraChannels
                switch kind {
                case .detect:
                    return []
                case .pose(let keypoints, let dims) where yolo26:
                    // Pose26 splits the last conv off as cv4_kpts; cv4_sigma and the flow model
                    // only train.
                    w.discard(prefix: "\(p).\(prefix)cv4_sigma.\(i)")
                    return try branch(q, c, max(channels[0] / 4, keypoints * (dims + 2)), e,
                                      last: "\(p).\(prefix)cv4_kpts.\(i)")
                case .segment, .pose, .obb:
                    return try branch(q, c, max(channels[0] / 4, e), e)
                }
            }
            return (box, cls, extra)
        }
        // The inference head is the one-to-one branch of end-to-end models, the one-to-many
        // branch otherwise. The other, present in unfused checkpoints of end-to-end models and
        // always in YOLOv10's (`bothBranches`), is bound (so its shapes are checked) and dropped.
        let (used, other) = endToEnd ? ("one2one_", "") : ("", "one2one_")
        (box, cls, extra) = try branches(used)
        if (endToEnd || bothBranches) && w.contains(prefix: "\(p).\(other)cv2") { _ = try branches(other) }
        w.discard(prefix: p + ".flow_model")
        switch kind {
        case .segment(let masks, let protoChannels) where yolo26:
            proto = try Proto26(&w, p + ".proto", channels: channels, hidden: protoChannels, masks: masks)
        case .segment(let masks, let protoChannels):
            proto = try Proto(&w, p + ".proto", channels[0], hidden: protoChannels, masks: masks)
        default:
            proto = nil
        }
        dfl = regMax > 1 ? try w.tensor(p + ".dfl.conv.weight", shape: [1, regMax, 1, 1]).scalars : []
    }

    /// feature(i): level i's [C_i, H_i, W_i] map. The results are maps of `ws` (`Workspace.result`).
    func forward(_ feature: (Int) -> Map, selection: HeadSelection, _ ws: Workspace) -> HeadMaps {
        let levels = strides.count, e = kind.extraChannels
        var a = 0
        for i in 0..<levels { a += feature(i).plane }
        /// A [c, A] map: a row per channel, a column per anchor.
        func rows(_ c: Int, result: Bool = false) -> Map {
            result ? ws.result(channels: c, height: 1, width: a) : ws.map(channels: c, height: 1, width: a)
        }
        let boxes = rows(4 * regMax, result: true), scores = rows(nc, result: true)
        let extras = e > 0 ? rows(e, result: true) : nil
        var column = 0
        for i in 0..<levels {
            let x = feature(i)
            run(box[i], x, into: boxes.base, columns: a, from: column, ws)
            run(cls[i], x, into: scores.base, columns: a, from: column, ws)
            if let extras { run(extra[i], x, into: extras.base, columns: a, from: column, ws) }
            column += x.plane
        }
        if case .obb = kind, !yolo26, let extras {
            // OBB: θ = (sigmoid(x) − 1/4)·π, in [−π/4, 3π/4].
            activate(.sigmoid, extras.base, extras.base, count: e * a)
            for i in 0..<(e * a) { extras.base[i] = (extras.base[i] - 0.25) * .pi }
        }
        // decoded [4 + E, A]: the boxes in input pixels, then the extras (keypoints decoded).
        let decoded = rows(4 + e)
        let angles: UnsafeMutablePointer<Float>?
        if case .obb = kind { angles = extras?.base } else { angles = nil }
        decode(boxes.base, anchors: a, angles: angles, feature, into: decoded.base, ws)
        if let extras {
            (decoded.base + 4 * a).update(from: extras.base, count: e * a)
            decodeKeypoints(decoded.base + 4 * a, anchors: a, feature)
        }
        let probs = rows(nc)
        activate(.sigmoid, scores.base, probs.base, count: nc * a)
        let output: Map
        if endToEnd {
            output = topK(decoded.base, probs.base, anchors: a, selection, ws)
        } else {
            // Ultralytics' order: box, class probabilities, then the task's extras.
            output = rows(4 + nc + e, result: true)
            output.base.update(from: decoded.base, count: 4 * a)
            (output.base + 4 * a).update(from: probs.base, count: nc * a)
            (output.base + (4 + nc) * a).update(from: decoded.base + 4 * a, count: e * a)
        }
        ws.release(probs)
        ws.release(decoded)
        return HeadMaps(output: output, outputRank: 3, protos: proto.map { $0(feature, ws) }, boxes: boxes, scores: scores,
                        logits: nil, extra: extras.map { (kind.extraName, $0) })
    }

    /// `Workspace.buffer` slots of the head's index tables.
    enum Slot {
        static let labels = 0, order = 1
    }

    /// The branch `convs` on x, its last map's rows written to columns `column ..< column + H·W` of
    /// `out` [C, columns].
    private func run(_ convs: [Conv], _ x: Map, into out: UnsafeMutablePointer<Float>, columns: Int, from column: Int,
                     _ ws: Workspace) {
        var y = convs[0](x, ws)
        ws.observe(convs[0].name, y)
        for conv in convs.dropFirst() {
            let next = conv(y, ws)
            ws.observe(conv.name, next)
            ws.release(y)
            y = next
        }
        copyRows(y.base, stride: y.plane, into: out + column, stride: columns, rows: y.channels, count: y.plane)
        ws.release(y)
    }

    /// Distances (left, top, right, bottom) from each anchor centre → boxes in input pixels:
    /// xyxy for end-to-end heads, xywh otherwise; with `angles`, rotated xywh (Ultralytics
    /// `dist2rbox`). boxes: [4 · regMax, A] → out [4, A].
    private func decode(_ boxes: UnsafeMutablePointer<Float>, anchors a: Int, angles: UnsafePointer<Float>?,
                        _ feature: (Int) -> Map, into out: UnsafeMutablePointer<Float>, _ ws: Workspace) {
        let p = regMax > 1 ? ws.map(channels: 4 * regMax + 4, height: 1, width: a) : nil
        defer { p.map(ws.release) }
        let d = distances(boxes, anchors: a, scratch: p?.base)
        var anchor = 0
        for level in 0..<strides.count {
            let s = Float(strides[level]), x = feature(level)
            for gy in 0..<x.height {
                for gx in 0..<x.width {
                    let (l, t, r, b) = (d[anchor], d[a + anchor], d[2 * a + anchor], d[3 * a + anchor])
                    let ax = Float(gx) + 0.5, ay = Float(gy) + 0.5
                    let values: (Float, Float, Float, Float)
                    if let angles {
                        let theta = angles[anchor], cosine = Foundation.cos(theta), sine = Foundation.sin(theta)
                        let xf = (r - l) / 2, yf = (b - t) / 2
                        values = (xf * cosine - yf * sine + ax, xf * sine + yf * cosine + ay, l + r, t + b)
                    } else {
                        let x1 = ax - l, y1 = ay - t, x2 = ax + r, y2 = ay + b
                        values = endToEnd ? (x1, y1, x2, y2) : ((x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1)
                    }
                    out[anchor] = values.0 * s
                    out[a + anchor] = values.1 * s
                    out[2 * a + anchor] = values.2 * s
                    out[3 * a + anchor] = values.3 * s
                    anchor += 1
                }
            }
        }
    }

    /// Keypoints, in place: x, y → input pixels, from offsets in cells from the anchor centre
    /// (Pose26: (x + gx + ½)·s) or twice that from the cell corner (Pose: (2x + gx)·s); the
    /// visibility logit → probability. kpts: [K · dims, A].
    private func decodeKeypoints(_ kpts: UnsafeMutablePointer<Float>, anchors a: Int, _ feature: (Int) -> Map) {
        guard case .pose(let keypoints, let dims) = kind else { return }
        let (scale, offset): (Float, Float) = yolo26 ? (1, 0.5) : (2, 0)
        var anchor = 0
        for level in 0..<strides.count {
            let s = Float(strides[level]), x = feature(level)
            for gy in 0..<x.height {
                for gx in 0..<x.width {
                    let ax = Float(gx) + offset, ay = Float(gy) + offset
                    for k in 0..<keypoints {
                        let row = k * dims
                        kpts[row * a + anchor] = (kpts[row * a + anchor] * scale + ax) * s
                        kpts[(row + 1) * a + anchor] = (kpts[(row + 1) * a + anchor] * scale + ay) * s
                    }
                    anchor += 1
                }
            }
        }
        if dims == 3 {
            for k in 0..<keypoints {
                let row = kpts + (k * 3 + 2) * a
                applyActivation(.sigmoid, row, row, count: a)
            }
        }
    }

    /// Ultralytics `DFL`: each side's distance as the expectation of its `regMax` bins under a
    /// softmax over them; the raw values when regMax is 1. boxes: [4 · regMax, A] → [4, A], in
    /// `scratch` ((4 · regMax + 4) · A floats) when regMax > 1.
    private func distances(_ boxes: UnsafeMutablePointer<Float>, anchors a: Int, scratch p: UnsafeMutablePointer<Float>?)
        -> UnsafePointer<Float> {
        guard regMax > 1, let p else { return UnsafePointer(boxes) }
        let d = p + 4 * regMax * a
        p.update(from: boxes, count: 4 * regMax * a)
        softmax(p, outer: 4, length: regMax, inner: a)
        d.initialize(repeating: 0, count: 4 * a)
        for side in 0..<4 {
            for k in 0..<regMax {
                let w = dfl[k], row = (side * regMax + k) * a
                for i in 0..<a { d[side * a + i] += p[row + i] * w }
            }
        }
        return UnsafePointer(d)
    }

    /// Ultralytics `Detect.postprocess`: the k anchors with the best class score, then the k
    /// best (anchor, class) pairs among them; with `agnostic`, the k best anchors with their
    /// best class each. decoded: [4 + E, A], probs: [nc, A] → [k, 6 + E] rows of
    /// (box, score, class, extras).
    private func topK(_ decoded: UnsafePointer<Float>, _ probs: UnsafePointer<Float>, anchors a: Int,
                      _ selection: HeadSelection, _ ws: Workspace) -> Map {
        precondition(selection.maxDetections > 0, "maxDetections must be positive, got \(selection.maxDetections)")
        let k = min(selection.maxDetections, a), e = kind.extraChannels
        let bestMap = ws.map(channels: 1, height: 1, width: a), best = bestMap.base
        defer { ws.release(bestMap) }
        let label = ws.buffer(Slot.labels, Int32.self, count: a)
        // Over the threads: it reads every class score of every anchor.
        columnMaxima(probs, rows: nc, columns: a, best, label)
        let order = ws.buffer(Slot.order, Int.self, count: max(a, k * nc))
        topIndices(best, count: a, k, order: order)
        let output = ws.result(channels: k, height: 1, width: 6 + e), out = output.base
        /// Row r: anchor `anchor`'s box, `score`, `label`, extras.
        func row(_ r: Int, anchor: Int, score: Float, label: Int) {
            let o = out + r * (6 + e)
            for j in 0..<4 { o[j] = decoded[j * a + anchor] }
            (o[4], o[5]) = (score, Float(label))
            for j in 0..<e { o[6 + j] = decoded[(4 + j) * a + anchor] }
        }
        if selection.agnostic {
            for r in 0..<k { row(r, anchor: order[r], score: best[order[r]], label: Int(label[order[r]])) }
        } else {
            let candidateMap = ws.map(channels: k, height: 1, width: nc), candidates = candidateMap.base
            defer { ws.release(candidateMap) }
            for j in 0..<k {
                for c in 0..<nc { candidates[j * nc + c] = probs[c * a + order[j]] }
            }
            // The anchors of the first k (over the labels, no longer read), before `order` is
            // reused for the pairs.
            let anchors = label
            for j in 0..<k { anchors[j] = Int32(order[j]) }
            topIndices(candidates, count: k * nc, k, order: order)
            for r in 0..<k {
                let pair = order[r]
                row(r, anchor: Int(anchors[pair / nc]), score: candidates[pair], label: pair % nc)
            }
        }
        return output
    }
}

import Foundation

/// What a model was trained to do, and so which fields of `Results` a prediction fills.
public enum YOLOTask: String, Sendable, Codable, CaseIterable, CustomStringConvertible {
    /// `boxes`.
    case detect
    /// `boxes` and one `masks` entry per box.
    case segment
    /// `boxes` and one `keypoints` entry per box.
    case pose
    /// `obb` (rotated boxes); `boxes` stays empty, as Ultralytics' `Results.boxes` is `None`.
    case obb
    /// `probs`.
    case classify

    public var description: String { rawValue }
}

/// One detected object, in original-image pixels.
public struct Box: Sendable, Equatable {
    /// x1, y1, x2, y2.
    public let xyxy: [Float]
    /// Confidence in 0…1.
    public let conf: Float
    /// Class index.
    public let cls: Int
    /// Class name.
    public let name: String
    /// Original image height and width, for the normalized forms.
    public let originalShape: [Int]
    /// Track ID from an `ObjectTracker`; nil when untracked.
    public var id: Int?

    /// A box in original-image pixels, e.g. from another detector, to track or draw.
    /// - Parameters:
    ///   - xyxy: x1, y1, x2, y2.
    ///   - conf: the confidence.
    ///   - cls: the class index.
    ///   - name: the class name.
    ///   - originalShape: the image's height and width.
    ///   - id: a track ID, nil when untracked.
    public init(xyxy: [Float], conf: Float, cls: Int, name: String, originalShape: [Int], id: Int? = nil) {
        self.xyxy = xyxy
        self.conf = conf
        self.cls = cls
        self.name = name
        self.originalShape = originalShape
        self.id = id
    }

    /// Centre x, centre y, width, height.
    public var xywh: [Float] {
        [(xyxy[0] + xyxy[2]) / 2, (xyxy[1] + xyxy[3]) / 2, xyxy[2] - xyxy[0], xyxy[3] - xyxy[1]]
    }

    /// xyxy divided by the image width and height.
    public var xyxyn: [Float] { normalized(xyxy) }

    /// xywh divided by the image width and height.
    public var xywhn: [Float] { normalized(xywh) }

    private func normalized(_ v: [Float]) -> [Float] {
        let h = Float(originalShape[0]), w = Float(originalShape[1])
        return [v[0] / w, v[1] / h, v[2] / w, v[3] / h]
    }
}

/// A rectangle of whole pixels: columns `x..<x + width`, rows `y..<y + height`.
public struct PixelRect: Sendable, Equatable, Codable {
    public let x, y, width, height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        (self.x, self.y, self.width, self.height) = (x, y, max(width, 0), max(height, 0))
    }
}

/// A binary mask over a frame of `width × height` pixels. Only the smallest rectangle holding
/// its set pixels is stored (`region`); every pixel outside it is 0.
public struct BinaryMask: Sendable, Equatable {
    /// Size of the frame the mask lies in.
    public let width, height: Int
    /// Where `pixels` lie in the frame; empty for an empty mask.
    public let region: PixelRect
    /// `region.width · region.height` bytes, rows top to bottom: 1 inside the object, 0 outside.
    public let pixels: [UInt8]
    /// Number of set pixels.
    public let area: Int

    /// A mask from a dense frame-sized buffer (non-zero = set), trimmed to its set pixels; nil
    /// when the buffer does not hold `width · height` bytes.
    public init?(width: Int, height: Int, dense: [UInt8]) {
        guard width >= 0, height >= 0, dense.count == width * height else { return nil }
        self.init(width: width, height: height, region: PixelRect(x: 0, y: 0, width: width, height: height), pixels: dense)
    }

    /// A mask from the bytes of `region` (non-zero = set), trimmed to its set pixels.
    package init(width: Int, height: Int, region: PixelRect, pixels: [UInt8]) {
        precondition(pixels.count == region.width * region.height, "region \(region) needs \(region.width * region.height) bytes")
        var x0 = Int.max, y0 = Int.max, x1 = Int.min, y1 = Int.min, area = 0
        for r in 0..<region.height {
            var first = -1, last = -1
            for c in 0..<region.width where pixels[r * region.width + c] != 0 {
                if first < 0 { first = c }
                last = c
                area += 1
            }
            if first >= 0 {
                x0 = min(x0, first); x1 = max(x1, last)
                y0 = min(y0, r); y1 = r
            }
        }
        self.width = width
        self.height = height
        self.area = area
        guard area > 0 else {
            self.region = PixelRect(x: 0, y: 0, width: 0, height: 0)
            self.pixels = []
            return
        }
        let trimmed = PixelRect(x: region.x + x0, y: region.y + y0, width: x1 - x0 + 1, height: y1 - y0 + 1)
        var out = [UInt8](repeating: 0, count: trimmed.width * trimmed.height)
        for r in 0..<trimmed.height {
            for c in 0..<trimmed.width where pixels[(r + y0) * region.width + c + x0] != 0 {
                out[r * trimmed.width + c] = 1
            }
        }
        self.region = trimmed
        self.pixels = out
    }

    /// Whether pixel (x, y) of the frame is set; false outside the frame.
    public subscript(x: Int, y: Int) -> Bool {
        let cx = x - region.x, cy = y - region.y
        guard cx >= 0, cy >= 0, cx < region.width, cy < region.height else { return false }
        return pixels[cy * region.width + cx] != 0
    }

    /// The whole frame, `width · height` bytes of 0 or 1, rows top to bottom.
    public func dense() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: width * height)
        for r in 0..<region.height {
            let d = (region.y + r) * width + region.x, s = r * region.width
            for c in 0..<region.width { out[d + c] = pixels[s + c] }
        }
        return out
    }
}

/// The segmentation mask of one detected object (segment models; `Results.masks[i]` belongs to
/// `Results.boxes[i]`).
public struct Mask: Sendable, Equatable {
    /// The mask in original-image pixels, as Ultralytics draws it: `inputBitmap` with the
    /// letterbox padding cut off, resized bilinearly to the image (`scale_masks`) and set where
    /// above 0.5. `nil` for results decoded from JSON.
    public let bitmap: BinaryMask?
    /// The mask at network-input resolution (padding included), exactly Ultralytics'
    /// `masks.data`: sigmoid(coefficients · prototypes) > 0.5, upsampled bilinearly to the input
    /// and cropped to the box (`process_mask`). `nil` for results decoded from JSON.
    public let inputBitmap: BinaryMask?
    /// Set pixels of the input-resolution mask (the reference files' `masks.area`).
    public let area: Int
    /// The outline in original-image pixels (Ultralytics `masks.xy`): the external contours of the
    /// input-resolution mask (OpenCV `findContours`, `RETR_EXTERNAL`, `CHAIN_APPROX_SIMPLE`),
    /// several joined into one as `merge_multi_segment` does, mapped back with `scale_coords`.
    public let xy: [SIMD2<Float>]
    /// Original image height and width.
    public let originalShape: [Int]

    /// `xy` divided by the image width and height (Ultralytics `masks.xyn`).
    public var xyn: [SIMD2<Float>] {
        let size = SIMD2(Float(originalShape[1]), Float(originalShape[0]))
        return xy.map { $0 / size }
    }
}

/// The keypoints of one detected object (pose models; `Results.keypoints[i]` belongs to
/// `Results.boxes[i]`), in original-image pixels.
public struct Keypoints: Sendable, Equatable {
    /// x, y of each keypoint (17 for COCO pose, in COCO order), clipped to the image.
    public let xy: [SIMD2<Float>]
    /// Visibility confidence of each keypoint in 0…1; empty for models without visibility.
    public let conf: [Float]
    /// Original image height and width.
    public let originalShape: [Int]

    /// `xy` divided by the image width and height.
    public var xyn: [SIMD2<Float>] {
        let size = SIMD2(Float(originalShape[1]), Float(originalShape[0]))
        return xy.map { $0 / size }
    }
}

/// One rotated box (obb models), in original-image pixels.
public struct OrientedBox: Sendable, Equatable {
    /// Centre x, centre y, width, height, rotation in radians, as the model predicts it (not
    /// clipped, the angle not normalized: Ultralytics 8.4.190 keeps it as is).
    public let xywhr: [Float]
    /// Confidence in 0…1.
    public let conf: Float
    /// Class index.
    public let cls: Int
    /// Class name.
    public let name: String
    /// Original image height and width.
    public let originalShape: [Int]
    /// Track ID from an `ObjectTracker`; nil when untracked.
    public var id: Int? = nil

    /// The four corners (Ultralytics `xywhr2xyxyxyxy`): centre ± half-width along the angle ±
    /// half-height across it.
    public var xyxyxyxy: [SIMD2<Float>] { corners(xywhr) }

    /// Corners divided by the image width and height.
    public var xyxyxyxyn: [SIMD2<Float>] {
        let size = SIMD2(Float(originalShape[1]), Float(originalShape[0]))
        return xyxyxyxy.map { $0 / size }
    }

    /// The axis-aligned box enclosing the corners: x1, y1, x2, y2.
    public var xyxy: [Float] {
        let c = xyxyxyxy
        guard !c.isEmpty else { return [0, 0, 0, 0] }
        return [c.map(\.x).min()!, c.map(\.y).min()!, c.map(\.x).max()!, c.map(\.y).max()!]
    }

    /// The same rectangle with its angle in [0, π/2), width and height swapped where needed
    /// (Ultralytics `regularize_rboxes`).
    public var regularized: OrientedBox {
        OrientedBox(xywhr: regularizedRotatedBox(xywhr), conf: conf, cls: cls, name: name, originalShape: originalShape, id: id)
    }
}

/// Ultralytics `xywhr2xyxyxyxy` for one box, in Float32 as PyTorch computes it.
package func corners(_ b: [Float]) -> [SIMD2<Float>] {
    guard b.count >= 5 else { return [] }
    let c = SIMD2(b[0], b[1]), cosine = Foundation.cos(b[4]), sine = Foundation.sin(b[4])
    let v1 = SIMD2(b[2] / 2 * cosine, b[2] / 2 * sine), v2 = SIMD2(-b[3] / 2 * sine, b[3] / 2 * cosine)
    return [c + v1 + v2, c + v1 - v2, c - v1 - v2, c - v1 + v2]
}

/// Ultralytics `regularize_rboxes`: angle modulo π/2, width and height swapped when the angle
/// modulo π lies in [π/2, π). xywhr → xywhr.
package func regularizedRotatedBox(_ b: [Float]) -> [Float] {
    guard b.count >= 5 else { return b }
    // Python's % (result has the sign of the divisor), in Float32 like the tensor.
    func mod(_ x: Float, _ m: Float) -> Float {
        let r = x - (x / m).rounded(.down) * m
        return r >= m ? r - m : r
    }
    let swap = mod(b[4], .pi) >= .pi / 2
    return [b[0], b[1], swap ? b[3] : b[2], swap ? b[2] : b[3], mod(b[4], .pi / 2)]
}

/// Class probabilities (classify models).
public struct Probs: Sendable, Equatable {
    /// Probability of every class, by class index.
    public let data: [Float]
    /// Class names by index.
    public let names: [String]
    /// The five most probable classes, most probable first (fewer when there are fewer classes).
    public let top5: [Int]

    public init(data: [Float], names: [String]) {
        self.data = data
        self.names = names
        top5 = Array(data.indices.sorted { data[$0] > data[$1] || (data[$0] == data[$1] && $0 < $1) }.prefix(5))
    }

    /// The most probable class.
    public var top1: Int { top5.first ?? 0 }
    public var top1conf: Float { data.isEmpty ? 0 : data[top1] }
    public var top5conf: [Float] { top5.map { data[$0] } }
    /// Names of `top5`.
    public var top5names: [String] { top5.map(name) }

    func name(_ i: Int) -> String { i < names.count ? names[i] : "class\(i)" }
}

/// Time spent per stage of one prediction, in milliseconds.
public struct Speed: Sendable, Equatable, Codable {
    public var preprocess: Double
    public var inference: Double
    public var postprocess: Double
}

/// When a frame was taken.
public enum FrameTime: Sendable, Equatable {
    /// Seconds into a video file: the frame's index over the video's frame rate.
    case offset(Double)
    /// When a frame of a live source arrived.
    case wallClock(Date)

    /// Seconds into the file, or since 1970.
    public var seconds: Double {
        switch self {
        case let .offset(seconds): seconds
        case let .wallClock(date): date.timeIntervalSince1970
        }
    }
}

/// The product plan's name for a result.
public typealias YOLOResult = Results

/// What a model found in one image, Ultralytics' `Results`: `task` says which fields are filled
/// (the others are empty). Encodes to JSON with the keys of Ultralytics' exported results
/// (`orig_shape`, `speed_ms`, `boxes`, `masks`, `keypoints`, `obb`, `probs`).
public struct Results: Sendable, Equatable {
    /// The image's file name, when it came from a file.
    public var path: String?
    /// The frame's 0-based index in its source (a video, image sequence or stream); nil for a
    /// single image.
    public var frame: Int?
    /// The source's index in a list of sources (a `.streams` file's line); nil for a single source.
    public var source: Int?
    /// When the frame was taken (not encoded): its time in a video file, the wall clock at its
    /// arrival from a live source; nil for a single image, image files and stdin.
    public var time: FrameTime?
    /// Which of `boxes`, `masks`, `keypoints`, `obb` and `probs` this result fills.
    public let task: YOLOTask
    /// Height and width of the original image.
    public let originalShape: [Int]
    /// The network input's shape [1, 3, H, W].
    public let inputShape: [Int]
    /// Detections sorted by confidence, highest first (detect, segment, pose); in track order
    /// when tracked.
    public let boxes: [Box]
    /// One mask per box (segment).
    public let masks: [Mask]
    /// One set of keypoints per box (pose).
    public let keypoints: [Keypoints]
    /// Rotated boxes sorted by confidence, highest first (obb).
    public let obb: [OrientedBox]
    /// Class probabilities (classify).
    public let probs: Probs?
    public let speed: Speed
    /// The image the results refer to (not encoded).
    public let image: Image?
    /// Outline width `annotated()` uses by default: the configuration's at prediction time
    /// (not encoded).
    public var lineWidth: Double?
    /// Frames per second of the session that produced the result, over its last 30 frames (the
    /// first frame: from its own processing time); nil for a single image (not encoded).
    public var fps: Double?

    package init(path: String? = nil, task: YOLOTask, originalShape: [Int], inputShape: [Int], boxes: [Box] = [],
                 masks: [Mask] = [], keypoints: [Keypoints] = [], obb: [OrientedBox] = [], probs: Probs? = nil,
                 speed: Speed = Speed(preprocess: 0, inference: 0, postprocess: 0), image: Image?) {
        self.path = path
        self.task = task
        self.originalShape = originalShape
        self.inputShape = inputShape
        self.boxes = boxes
        self.masks = masks
        self.keypoints = keypoints
        self.obb = obb
        self.probs = probs
        self.speed = speed
        self.image = image
    }

    /// Ultralytics' per-image summary (`Results.verbose()`): "4 persons, 1 bus, " in class-index
    /// order, "(no detections), ", or the top 5 classes as "minibus 0.59, police_van 0.26, ".
    public var summary: String {
        if let probs {
            return probs.top5.map { "\(probs.name($0)) \(String(format: "%.2f", Double(probs.data[$0])))" }
                .joined(separator: ", ") + (probs.top5.isEmpty ? "" : ", ")
        }
        let labels = task == .obb ? obb.map { ($0.cls, $0.name) } : boxes.map { ($0.cls, $0.name) }
        guard !labels.isEmpty else { return "(no detections), " }
        var counts = [Int: (name: String, n: Int)]()
        for (cls, name) in labels { counts[cls, default: (name, 0)].n += 1 }
        return counts.keys.sorted().map { c in
            let (name, n) = counts[c]!
            return "\(n) \(name)\(n > 1 ? "s" : ""), "
        }.joined()
    }
}
extension Results: Codable {
    private enum CodingKeys: String, CodingKey {
        case path = "image", frame, source, originalShape = "orig_shape", inputShape = "input_shape", speed = "speed_ms", boxes, names
        case masks, keypoints, obb, probs
    }

    private struct BoxColumns: Codable {
        var xyxy: [[Float]], conf: [Float], cls: [Int]
        /// Absent in Ultralytics' own export, which has a top-level `names` map instead.
        var name: [String]?
        /// Track IDs, present only when every box is tracked (Ultralytics' `boxes.id`, which is
        /// None unless all are); an empty list reads as untracked.
        var id: [Int]?
    }

    private struct MaskColumns: Codable {
        var shape: [Int]?
        var area: [Int]
        var polygons: [[SIMD2<Float>]]
        enum CodingKeys: String, CodingKey { case shape, area, polygons = "polygons_xy" }
    }

    private struct KeypointColumns: Codable {
        var xy: [[SIMD2<Float>]]
        var conf: [[Float]]?
    }

    private struct OBBColumns: Codable {
        var xywhr: [[Float]], xyxyxyxy: [[SIMD2<Float>]]?, conf: [Float], cls: [Int]
        var name: [String]?
        /// Track IDs, as `BoxColumns.id`.
        var id: [Int]?
    }

    private struct ProbColumns: Codable {
        var top5: [Int]?, top5conf: [Float]?, data: [Float]
        var top5name: [String]?
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(path, forKey: .path)
        try c.encodeIfPresent(frame, forKey: .frame)
        try c.encodeIfPresent(source, forKey: .source)
        try c.encode(originalShape, forKey: .originalShape)
        try c.encode(inputShape, forKey: .inputShape)
        try c.encode(speed, forKey: .speed)
        switch task {
        case .detect, .segment, .pose:
            let ids = boxes.compactMap(\.id)
            try c.encode(BoxColumns(xyxy: boxes.map(\.xyxy), conf: boxes.map(\.conf), cls: boxes.map(\.cls),
                                    name: boxes.map(\.name), id: !ids.isEmpty && ids.count == boxes.count ? ids : nil),
                         forKey: .boxes)
        case .obb:
            let ids = obb.compactMap(\.id)
            try c.encode(OBBColumns(xywhr: obb.map(\.xywhr), xyxyxyxy: obb.map(\.xyxyxyxy), conf: obb.map(\.conf),
                                    cls: obb.map(\.cls), name: obb.map(\.name),
                                    id: !ids.isEmpty && ids.count == obb.count ? ids : nil), forKey: .obb)
        case .classify:
            break
        }
        if task == .segment {
            let plane = inputShape.count == 4 ? [inputShape[2], inputShape[3]] : []
            try c.encode(MaskColumns(shape: [masks.count] + plane, area: masks.map(\.area), polygons: masks.map(\.xy)),
                         forKey: .masks)
        }
        if task == .pose {
            try c.encode(KeypointColumns(xy: keypoints.map(\.xy), conf: keypoints.map(\.conf)), forKey: .keypoints)
        }
        if let probs {
            try c.encode(ProbColumns(top5: probs.top5, top5conf: probs.top5conf, data: probs.data, top5name: probs.top5names),
                         forKey: .probs)
        }
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        frame = try c.decodeIfPresent(Int.self, forKey: .frame)
        source = try c.decodeIfPresent(Int.self, forKey: .source)
        originalShape = try c.decode([Int].self, forKey: .originalShape)
        guard originalShape.count >= 2 else {
            throw DecodingError.dataCorruptedError(forKey: .originalShape, in: c, debugDescription: "orig_shape is not [height, width]")
        }
        inputShape = try c.decodeIfPresent([Int].self, forKey: .inputShape) ?? []
        speed = try c.decodeIfPresent(Speed.self, forKey: .speed) ?? Speed(preprocess: 0, inference: 0, postprocess: 0)
        let classNames = try c.decodeIfPresent([String: String].self, forKey: .names) ?? [:]
        func names(_ given: [String]?, _ cls: [Int]) -> [String] {
            given.flatMap { $0.count == cls.count ? $0 : nil } ?? cls.map { classNames[String($0)] ?? "class\($0)" }
        }
        let shape = originalShape
        image = nil

        if let columns = try c.decodeIfPresent(BoxColumns.self, forKey: .boxes) {
            let ids = columns.id.flatMap { $0.isEmpty ? nil : $0 }
            guard columns.conf.count == columns.xyxy.count, columns.cls.count == columns.xyxy.count,
                  ids.map({ $0.count == columns.xyxy.count }) ?? true, columns.xyxy.allSatisfy({ $0.count == 4 }) else {
                throw DecodingError.dataCorruptedError(forKey: .boxes, in: c, debugDescription: "box columns differ in length")
            }
            let n = names(columns.name, columns.cls)
            boxes = columns.xyxy.indices.map {
                Box(xyxy: columns.xyxy[$0], conf: columns.conf[$0], cls: columns.cls[$0], name: n[$0], originalShape: shape,
                    id: ids?[$0])
            }
        } else {
            boxes = []
        }
        if let columns = try c.decodeIfPresent(MaskColumns.self, forKey: .masks) {
            guard columns.area.count == boxes.count, columns.polygons.count == boxes.count else {
                throw DecodingError.dataCorruptedError(forKey: .masks, in: c, debugDescription: "one mask per box expected")
            }
            masks = zip(columns.area, columns.polygons).map {
                Mask(bitmap: nil, inputBitmap: nil, area: $0, xy: $1, originalShape: shape)
            }
        } else {
            masks = []
        }
        if let columns = try c.decodeIfPresent(KeypointColumns.self, forKey: .keypoints) {
            let conf = columns.conf ?? columns.xy.map { _ in [] }
            guard columns.xy.count == boxes.count, conf.count == boxes.count,
                  zip(columns.xy, conf).allSatisfy({ $1.isEmpty || $0.count == $1.count }) else {
                throw DecodingError.dataCorruptedError(forKey: .keypoints, in: c, debugDescription: "one set of keypoints per box expected")
            }
            keypoints = zip(columns.xy, conf).map { Keypoints(xy: $0, conf: $1, originalShape: shape) }
        } else {
            keypoints = []
        }
        if let columns = try c.decodeIfPresent(OBBColumns.self, forKey: .obb) {
            let ids = columns.id.flatMap { $0.isEmpty ? nil : $0 }
            guard columns.conf.count == columns.xywhr.count, columns.cls.count == columns.xywhr.count,
                  ids.map({ $0.count == columns.xywhr.count }) ?? true, columns.xywhr.allSatisfy({ $0.count == 5 }) else {
                throw DecodingError.dataCorruptedError(forKey: .obb, in: c, debugDescription: "obb columns differ in length")
            }
            let n = names(columns.name, columns.cls)
            obb = columns.xywhr.indices.map {
                OrientedBox(xywhr: columns.xywhr[$0], conf: columns.conf[$0], cls: columns.cls[$0], name: n[$0], originalShape: shape,
                            id: ids?[$0])
            }
        } else {
            obb = []
        }
        if let columns = try c.decodeIfPresent(ProbColumns.self, forKey: .probs) {
            var all = (0..<columns.data.count).map { classNames[String($0)] ?? "class\($0)" }
            if let top5 = columns.top5, let given = columns.top5name, given.count == top5.count {
                for (i, name) in zip(top5, given) where all.indices.contains(i) { all[i] = name }
            }
            probs = Probs(data: columns.data, names: all)
        } else {
            probs = nil
        }
        task = probs != nil ? .classify : c.contains(.obb) ? .obb
            : c.contains(.masks) ? .segment : c.contains(.keypoints) ? .pose : .detect
    }
}

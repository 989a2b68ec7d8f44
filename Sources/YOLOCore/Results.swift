import Foundation

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

/// Time spent per stage of one prediction, in milliseconds.
public struct Speed: Sendable, Equatable, Codable {
    public var preprocess: Double
    public var inference: Double
    public var postprocess: Double
}

/// The detections for one image. Encodes to JSON with the keys of Ultralytics' exported
/// results (`orig_shape`, `speed_ms`, `boxes.xyxy`, `boxes.conf`, `boxes.cls`, `boxes.name`).
public struct DetectionResult: Sendable, Equatable {
    /// The image's file name, when it came from a file.
    public var path: String?
    /// Height and width of the original image.
    public let originalShape: [Int]
    /// The network input's shape [1, 3, H, W].
    public let inputShape: [Int]
    /// Detections sorted by confidence, highest first.
    public let boxes: [Box]
    public let speed: Speed
    /// The image the boxes refer to (not encoded).
    public let image: Image?
}

extension DetectionResult: Codable {
    private enum CodingKeys: String, CodingKey {
        case path = "image", originalShape = "orig_shape", inputShape = "input_shape", speed = "speed_ms", boxes, names
    }

    private struct Columns: Codable {
        var xyxy: [[Float]], conf: [Float], cls: [Int]
        /// Absent in Ultralytics' own export, which has a top-level `names` map instead.
        var name: [String]?
    }

    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(path, forKey: .path)
        try c.encode(originalShape, forKey: .originalShape)
        try c.encode(inputShape, forKey: .inputShape)
        try c.encode(speed, forKey: .speed)
        try c.encode(Columns(xyxy: boxes.map(\.xyxy), conf: boxes.map(\.conf), cls: boxes.map(\.cls),
                             name: boxes.map(\.name)), forKey: .boxes)
    }

    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        path = try c.decodeIfPresent(String.self, forKey: .path)
        originalShape = try c.decode([Int].self, forKey: .originalShape)
        inputShape = try c.decodeIfPresent([Int].self, forKey: .inputShape) ?? []
        speed = try c.decodeIfPresent(Speed.self, forKey: .speed) ?? Speed(preprocess: 0, inference: 0, postprocess: 0)
        let columns = try c.decode(Columns.self, forKey: .boxes)
        guard columns.conf.count == columns.xyxy.count, columns.cls.count == columns.xyxy.count,
              columns.xyxy.allSatisfy({ $0.count == 4 }) else {
            throw DecodingError.dataCorruptedError(forKey: .boxes, in: c, debugDescription: "box columns differ in length")
        }
        let classNames = try c.decodeIfPresent([String: String].self, forKey: .names) ?? [:]
        let names = columns.name.flatMap { $0.count == columns.xyxy.count ? $0 : nil }
            ?? columns.cls.map { classNames[String($0)] ?? "class\($0)" }
        let shape = originalShape
        boxes = columns.xyxy.indices.map {
            Box(xyxy: columns.xyxy[$0], conf: columns.conf[$0], cls: columns.cls[$0], name: names[$0], originalShape: shape)
        }
        image = nil
    }
}

import Foundation
import YOLONet

/// The arithmetic of a model's convolutions, chosen when it loads.
public enum YOLOPrecision: String, Sendable, Codable, CaseIterable {
    /// 32-bit floats throughout: PyTorch's results.
    case fp32
    /// Convolutions in 8-bit integers (weights quantized per output channel at load, each
    /// convolution's input per tensor as it runs), the rest in floats: faster, with results
    /// close to fp32's (docs/PERFORMANCE.md has the accuracy).
    case int8

    /// YOLONet's name for it.
    package var graph: Precision { self == .int8 ? .int8 : .fp32 }
}

/// Prediction settings, with Ultralytics' defaults. A `YOLO` model reads its configuration at
/// the start of every prediction, so changes apply from the next image on.
public struct YOLOConfiguration: Sendable, Equatable, Codable {
    /// Minimum confidence of a kept detection, in 0…1 (Ultralytics' `conf`).
    public var confidenceThreshold: Float = 0.25
    /// IoU above which NMS suppresses the weaker of two boxes (legacy models), in 0…1
    /// (Ultralytics' `iou`).
    public var iouThreshold: Float = 0.7
    /// Most detections kept per image, ≥ 1.
    public var maxDetections: Int = 300
    /// Keep only these class indices (nil keeps all).
    public var classes: [Int]? = nil
    /// Drop these class indices, before NMS as `classes` filters (empty drops none).
    public var excludedClasses: Set<Int> = []
    /// Cross-class suppression after NMS: of two final boxes of different classes overlapping by
    /// more than `overlapThreshold` (IoU), the one whose class has the lower priority goes (a class
    /// missing from the map has priority 0; equal priorities keep both). Empty: no suppression.
    public var classPriority: [Int: Int] = [:]
    /// IoU above which `classPriority` suppresses a box, in 0…1.
    public var overlapThreshold: Float = 0.4
    /// NMS across classes instead of per class (legacy models); end-to-end models keep one
    /// detection per anchor, with its best class.
    public var agnosticNMS: Bool = false
    /// Long side of the network input; the model's training size when nil.
    public var imageSize: Int? = nil
    /// `[height, width]` of the field the image is fitted into, in place of `imageSize`'s square
    /// (Ultralytics' `imgsz=[h, w]`); each side rounds up to a multiple of the stride.
    public var imageShape: [Int]? = nil
    /// Pad to a square `imageSize` × `imageSize` instead of the minimal stride-aligned rectangle.
    public var square: Bool = false
    /// Box outline width in pixels for `annotated()`, 0.5…3; derived from the image size when nil.
    public var lineWidth: Double? = nil
    /// Most bytes a prediction's working memory may take, estimated before any is allocated: a
    /// larger input size is refused with `YOLOError.memoryBudgetExceeded`. Default (nil): half
    /// of the memory available (`defaultMemoryBudget`).
    public var memoryBudget: Int? = nil
    /// Largest width · height of an image file `predict` decodes; see `Image(contentsOf:maxPixels:)`.
    public var maxImagePixels: Int = Image.defaultMaxPixels
    /// Threads a prediction's kernels use, in 1…1024. Default (nil): one per core the process may
    /// run on; `fromEnvironment()` reads `YOLO_NUM_THREADS`.
    public var threads: Int? = nil

    public init() {}

    /// The defaults with `threads` from the environment, read where a program starts (the library
    /// reads none): `YOLO_NUM_THREADS`, an integer in 1…1024 (another value is an error naming
    /// it), else the first integer in 1…1024 among OpenBLAS's `OPENBLAS_NUM_THREADS`,
    /// `GOTO_NUM_THREADS` and `OMP_NUM_THREADS`, which set the count before it existed.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> YOLOConfiguration {
        var configuration = YOLOConfiguration()
        if let text = environment["YOLO_NUM_THREADS"] {
            guard let threads = Int(text), (1...1024).contains(threads) else {
                throw YOLOError.invalidConfiguration(field: "YOLO_NUM_THREADS", value: text, reason: "must be an integer in 1…1024")
            }
            configuration.threads = threads
        } else {
            configuration.threads = ["OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS"].lazy
                .compactMap { environment[$0].flatMap { Int($0) } }.first { (1...1024).contains($0) }
        }
        return configuration
    }

    /// Throws `YOLOError.invalidConfiguration` naming the first bad field.
    public func validate() throws {
        func fail(_ field: String, _ value: Any, _ reason: String) -> YOLOError {
            .invalidConfiguration(field: field, value: "\(value)", reason: reason)
        }
        guard (0...1).contains(confidenceThreshold) else { throw fail("confidenceThreshold", confidenceThreshold, "must be in 0…1") }
        guard (0...1).contains(iouThreshold) else { throw fail("iouThreshold", iouThreshold, "must be in 0…1") }
        guard maxDetections >= 1 else { throw fail("maxDetections", maxDetections, "must be at least 1") }
        if let classes, let bad = classes.first(where: { $0 < 0 }) { throw fail("classes", bad, "class indices are ≥ 0") }
        if let bad = excludedClasses.min(), bad < 0 { throw fail("excludedClasses", bad, "class indices are ≥ 0") }
        guard (0...1).contains(overlapThreshold) else { throw fail("overlapThreshold", overlapThreshold, "must be in 0…1") }
        if let imageSize, !(32...8192).contains(imageSize) { throw fail("imageSize", imageSize, "must be in 32…8192") }
        if let imageShape, imageShape.count != 2 || !imageShape.allSatisfy({ (32...8192).contains($0) }) {
            throw fail("imageShape", imageShape, "must be [height, width], each in 32…8192")
        }
        if let lineWidth, !(0.5...3).contains(lineWidth) { throw fail("lineWidth", lineWidth, "must be in 0.5…3") }
        if let memoryBudget, memoryBudget <= 0 { throw fail("memoryBudget", memoryBudget, "must be a positive number of bytes") }
        guard maxImagePixels >= 1 else { throw fail("maxImagePixels", maxImagePixels, "must be at least 1") }
        if let threads, !(1...1024).contains(threads) { throw fail("threads", threads, "must be in 1…1024") }
    }

    /// Half of the smallest of the physical memory, the cgroup's memory limit and the address
    /// space limit: the first exhausted makes an allocation fail or the process be killed.
    public static let defaultMemoryBudget: Int = {
        var available = Int(clamping: ProcessInfo.processInfo.physicalMemory)
        if let text = try? String(contentsOfFile: "/sys/fs/cgroup/memory.max", encoding: .utf8),
           let limit = Int(text.trimmingCharacters(in: .whitespacesAndNewlines)) {
            available = min(available, limit)
        }
        var limit = rlimit()
        if getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max {
            available = min(available, Int(clamping: limit.rlim_cur))
        }
        return available / 2
    }()
}

import Dispatch
import Foundation
import Synchronization
import Tensor
import YOLONet

/// A YOLO model ready to predict. Safe to share: any number of tasks may call `predict` at
/// once; each call reads the configuration as it is when the call starts.
///
/// ```swift
/// let model = try await YOLO("yolo26n")
/// let result = try await model.predict("bus.jpg")
/// for box in result.boxes { print(box.name, box.conf, box.xyxy) }
/// ```
public final class YOLO: Sendable {
    let model: Model
    private let settings: Mutex<YOLOConfiguration>

    /// Where the weights were loaded from.
    public let url: URL
    /// Class names by index.
    public var names: [String] { model.names }
    /// The task the model was trained for: "detect", "segment", "pose", "obb" or "classify".
    public var task: String { model.task }

    /// Settings used from the next prediction on. Setting an invalid value throws at the next
    /// prediction, naming the field.
    public var configuration: YOLOConfiguration {
        get { settings.withLock { $0 } }
        set { settings.withLock { $0 = newValue } }
    }

    /// Loads a model by name ("yolo26n", searched in `YOLO_WEIGHTS_DIR`, `Weights/` and the
    /// download cache) or by path to a `.safetensors` file.
    public convenience init(_ nameOrPath: String, configuration: YOLOConfiguration = YOLOConfiguration()) async throws {
        try self.init(contentsOf: try ModelLocator.url(for: nameOrPath), configuration: configuration)
    }

    /// Loads a model from a `.safetensors` file.
    public init(contentsOf url: URL, configuration: YOLOConfiguration = YOLOConfiguration()) throws {
        try configuration.validate()
        do {
            model = try Model(contentsOf: url)
        } catch {
            throw YOLOError.invalidModel(path: url.path, reason: (error as? LocalizedError)?.errorDescription ?? "\(error)")
        }
        self.url = url
        settings = Mutex(configuration)
    }

    /// Detects objects in an image file (JPEG or PNG).
    public func predict(_ path: String) async throws -> DetectionResult {
        var result = try self(try Image(contentsOf: URL(fileURLWithPath: path)))
        result.path = URL(fileURLWithPath: path).lastPathComponent
        return result
    }

    /// Detects objects in an image.
    public func predict(_ image: Image) async throws -> DetectionResult {
        try self(image)
    }

    /// Detects objects in an image, synchronously.
    public func callAsFunction(_ image: Image) throws -> DetectionResult {
        guard task == "detect" else { throw YOLOError.taskMismatch(model: url.lastPathComponent, task: task, requested: "detect") }
        let config = configuration
        try config.validate()
        let start = DispatchTime.now().uptimeNanoseconds
        // Ultralytics' check_imgsz: the size rounds up to a multiple of the stride.
        let stride = model.network.maxStride
        let size = ((config.imageSize ?? model.imageSize) + stride - 1) / stride * stride
        let letterbox = Letterbox(imgsz: size, stride: stride, auto: !config.square)
        let (input, transform) = letterbox(image)
        let preprocessed = DispatchTime.now().uptimeNanoseconds
        let head = try model.network.forward(input)
        let inferred = DispatchTime.now().uptimeNanoseconds
        let raw = model.architecture.endToEnd ? selectEndToEnd(head.output, config) : nonMaxSuppression(head.output, config)
        let shape = [image.height, image.width]
        let boxes = raw.map { d in
            let b = transform.scaleBox(d.box)
            return Box(xyxy: [b[0], b[1], b[2], b[3]], conf: d.score, cls: d.cls,
                       name: d.cls < names.count ? names[d.cls] : "class\(d.cls)", originalShape: shape)
        }
        let done = DispatchTime.now().uptimeNanoseconds
        func ms(_ a: UInt64, _ b: UInt64) -> Double { Double(b - a) / 1e6 }
        return DetectionResult(path: nil, originalShape: shape, inputShape: input.shape, boxes: boxes,
                               speed: Speed(preprocess: ms(start, preprocessed), inference: ms(preprocessed, inferred),
                                            postprocess: ms(inferred, done)),
                               image: image)
    }
}

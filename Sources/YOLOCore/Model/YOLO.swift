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
///
/// let segmenter = try await YOLO("yolo26n-seg")       // the task comes from the weight file
/// let masks = try await segmenter.predict("bus.jpg", task: .segment).masks  // checked: taskMismatch otherwise
/// let top5 = try await YOLO("yolo26n-cls").predict("bus.jpg").probs?.top5names
/// ```
public final class YOLO: Sendable {
    let model: Model
    private let settings: Mutex<YOLOConfiguration>
    /// Workspaces of finished predictions, for the next ones (as many as ran at once).
    private let workspaces = Mutex<[Workspace]>([])
    /// Working memory per input pixel, measured by the first prediction (`checkMemory`).
    private let bytesPerPixel = Mutex<Double?>(nil)

    /// Where the weights were loaded from.
    public let url: URL
    /// The task given at load: what predictions asked for no task run.
    private let loadedTask: YOLOTask?
    /// The arithmetic of the model's convolutions, chosen at load.
    public let precision: YOLOPrecision
    /// Class names by index.
    public var names: [String] { model.names }
    /// The task the model was trained for, from its weight file.
    public var task: YOLOTask { YOLOTask(rawValue: model.task.rawValue) ?? .detect }
    /// The input size the model was trained at, used when the configuration gives none.
    package var imageSize: Int { model.imageSize }

    /// Settings used from the next prediction on. Setting an invalid value throws at the next
    /// prediction, naming the field.
    public var configuration: YOLOConfiguration {
        get { settings.withLock { $0 } }
        set { settings.withLock { $0 = newValue } }
    }

    /// Loads a model by name ("yolo26n": found in `store`, or an official model downloaded into its
    /// cache), by path to a `.pt` or `.safetensors` file, or by http(s) URL (as `init(url:)`).
    /// `store` nil reads `ModelStore.fromEnvironment()` (`YOLO_WEIGHTS_DIR`, `YOLO_OFFLINE`, …).
    /// `task`: see `init(contentsOf:task:configuration:precision:)`.
    public convenience init(_ nameOrPath: String, task: YOLOTask? = nil, store: ModelStore? = nil,
                            configuration: YOLOConfiguration = YOLOConfiguration(),
                            precision: YOLOPrecision = .fp32) async throws {
        let store = try store ?? .fromEnvironment()
        if let url = ModelStore.httpURL(nameOrPath) {
            try await self.init(url: url, task: task, store: store, configuration: configuration, precision: precision)
        } else {
            try self.init(contentsOf: try store.url(for: nameOrPath), task: task, configuration: configuration, precision: precision)
        }
    }

    /// Loads a model from a `.safetensors` or `.pt` file. A CPU without the instruction-set features the
    /// build targets is refused here, with an error naming them, before any kernel runs; a build
    /// without AVX2 and FMA prints `CPU.slowBuildWarning` to stderr, once per process.
    ///
    /// - Parameters:
    ///   - url: the weight file.
    ///   - task: the task the model must serve, checked as the weights are read: a model that
    ///     cannot serve it (see `predict(_:task:)`) throws `YOLOError.taskMismatch` here. Predictions
    ///     that ask for no task then run this one. `nil` serves the model's own task.
    ///   - configuration: the settings predictions start with (`configuration`).
    ///   - precision: fixed here: int8 weights are quantized as they load.
    public init(contentsOf url: URL, task: YOLOTask? = nil, configuration: YOLOConfiguration = YOLOConfiguration(),
                precision: YOLOPrecision = .fp32) throws {
        try CPU.checkTargetFeatures()
        _ = slowBuildWarned
        try configuration.validate()
        do {
            model = try Model(contentsOf: url, precision: precision.graph)
        } catch {
            throw YOLOError.invalidModel(path: url.path, reason: (error as? LocalizedError)?.errorDescription ?? "\(error)")
        }
        self.url = url
        self.precision = precision
        settings = Mutex(configuration)
        let own = YOLOTask(rawValue: model.task.rawValue) ?? .detect
        loadedTask = try task.map { try Self.resolve($0, of: own, model: url) }
    }

    /// Runs the model on an image file (JPEG or PNG), or one at an http(s) URL (downloaded first).
    ///
    /// - Parameters:
    ///   - path: the image file or URL; its last path component becomes `Results.path`.
    ///   - task: the task the caller expects; `nil` runs the model's own task. Asking for another
    ///     task throws `YOLOError.taskMismatch`, except `.detect` from a segment or pose model,
    ///     which gives its boxes alone (no mask or keypoint post-processing).
    /// - Returns: results whose `task` says which fields are filled: `boxes` (detect), plus
    ///   `masks` (segment) or `keypoints` (pose) one per box, `obb` (obb) or `probs` (classify).
    ///
    /// Decoding and the pass run on the model's inference threads, never on Swift's cooperative
    /// pool, one pass per core at a time. Cancelling the calling task stops the pass before its
    /// next layer and throws `CancellationError`.
    public func predict(_ path: String, task: YOLOTask? = nil) async throws -> Results {
        let config = configuration
        let remote = URL(string: path).flatMap { ["http", "https"].contains($0.scheme?.lowercased() ?? "") ? $0 : nil }
        // libcurl blocks: a download runs on a Dispatch thread, not an inference or a cooperative one.
        let downloaded: Image? = if let remote {
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Image, Error>) in
                DispatchQueue.global().async {
                    done.resume(with: Result { try Image(downloading: remote, maxPixels: config.maxImagePixels) })
                }
            }
        } else {
            nil
        }
        return try await InferenceExecutor.shared.run { cancellation in
            let image = try downloaded ?? Image(contentsOf: URL(fileURLWithPath: path), maxPixels: config.maxImagePixels)
            var result = try self(image, task: task, configuration: config, cancellation: cancellation)
            result.path = (remote ?? URL(fileURLWithPath: path)).lastPathComponent
            return result
        }
    }

    /// Runs the model on an image; see `predict(_:task:)` for `task` and where the pass runs.
    public func predict(_ image: Image, task: YOLOTask? = nil) async throws -> Results {
        let config = configuration
        return try await InferenceExecutor.shared.run { try self(image, task: task, configuration: config, cancellation: $0) }
    }

    /// Runs the model on an image, synchronously on the calling thread (not from a task: it blocks
    /// for the whole pass); see `predict(_:task:)` for `task`.
    public func callAsFunction(_ image: Image, task requested: YOLOTask? = nil) throws -> Results {
        try callAsFunction(image, task: requested, configuration: configuration)
    }

    /// Runs the model on an image with `config` in place of the model's own configuration (a
    /// session's settings, which must not leak into a model shared with other code).
    package func callAsFunction(_ image: Image, task requested: YOLOTask?, configuration config: YOLOConfiguration,
                                cancellation: Cancellation? = nil) throws -> Results {
        let task = try resolve(requested)
        try config.validate()
        let start = DispatchTime.now().uptimeNanoseconds
        // Ultralytics' check_imgsz: each side rounds up to a multiple of the stride.
        let stride = model.network.maxStride
        func aligned(_ side: Int) -> Int { (side + stride - 1) / stride * stride }
        let field = config.imageShape ?? [config.imageSize ?? model.imageSize, config.imageSize ?? model.imageSize]
        let (fieldHeight, fieldWidth) = (aligned(field[0]), aligned(field[1]))
        let size = max(fieldHeight, fieldWidth)
        if self.task == .classify && fieldHeight != fieldWidth {
            throw YOLOError.invalidConfiguration(field: "imageShape", value: "\(field)", reason: "a classify model's input is square: give one size")
        }
        let shape = [image.height, image.width]
        func ms(_ a: UInt64, _ b: UInt64) -> Double { Double(b - a) / 1e6 }
        // The check scales the field's long side to s, the other in proportion.
        try checkMemory(size, stride: stride, budget: config.memoryBudget ?? YOLOConfiguration.defaultMemoryBudget) { s in
            if self.task == .classify { return (s, s) }
            let t = Letterbox(height: aligned(fieldHeight * s / size), width: aligned(fieldWidth * s / size), stride: stride,
                              auto: !config.square).transform(width: image.width, height: image.height)
            return (t.inputHeight, t.inputWidth)
        }

        if self.task == .classify {
            let input = ClassifyTransform(size: size)(image)
            let preprocessed = DispatchTime.now().uptimeNanoseconds
            let head = try infer(input, HeadSelection(), threads: config.threads, cancellation: cancellation)
            let inferred = DispatchTime.now().uptimeNanoseconds
            guard head.output.count == names.count else {
                throw invalidOutput("classify output \(head.output.shape) for \(names.count) classes")
            }
            let probs = Probs(data: head.output.scalars, names: names)
            let done = DispatchTime.now().uptimeNanoseconds
            var result = Results(task: .classify, originalShape: shape, inputShape: input.shape, probs: probs,
                                 speed: Speed(preprocess: ms(start, preprocessed), inference: ms(preprocessed, inferred),
                                              postprocess: ms(inferred, done)),
                                 image: image)
            result.lineWidth = config.lineWidth
            return result
        }

        let letterbox = Letterbox(height: fieldHeight, width: fieldWidth, stride: stride, auto: !config.square)
        let (input, transform) = letterbox(image)
        let preprocessed = DispatchTime.now().uptimeNanoseconds
        // Ultralytics sets the end-to-end head's top-k to max(max_det, 300) and its agnostic flag.
        let head = try infer(input, HeadSelection(maxDetections: max(config.maxDetections, 300), agnostic: config.agnosticNMS),
                             threads: config.threads, cancellation: cancellation)
        let inferred = DispatchTime.now().uptimeNanoseconds
        let raw = try detections(head, config)
        var boxes = [Box](), masks = [Mask](), keypoints = [Keypoints](), obb = [OrientedBox]()
        func box(_ d: RawDetection) -> Box {
            let b = transform.scaleBox(d.box)
            return Box(xyxy: [b[0], b[1], b[2], b[3]], conf: d.score, cls: d.cls, name: name(d.cls), originalShape: shape)
        }
        switch (self.task, task) {
        case (.segment, .segment):
            guard let protos = head.protos else { throw invalidOutput("a segment head without prototypes") }
            let inputMasks = processMasks(protos: protos, coefficients: raw.map(\.extra), boxes: raw.map(\.box),
                                          inputWidth: transform.inputWidth, inputHeight: transform.inputHeight)
            // Ultralytics keeps only the detections whose mask has a pixel.
            for (d, m) in zip(raw, inputMasks) where m.area > 0 {
                boxes.append(box(d))
                masks.append(Mask(bitmap: scaleMask(m, originalWidth: image.width, originalHeight: image.height),
                                  inputBitmap: m, area: m.area,
                                  xy: maskOutline(m).map { transform.scalePoint($0) }, originalShape: shape))
            }
        case (.pose, .pose):
            let dims = model.architecture.kptShape.flatMap { $0.count == 2 ? $0[1] : nil } ?? 3
            for d in raw {
                boxes.append(box(d))
                let k = d.extra.count / dims
                keypoints.append(Keypoints(
                    xy: (0..<k).map { transform.scalePoint(SIMD2(d.extra[$0 * dims], d.extra[$0 * dims + 1])) },
                    conf: dims >= 3 ? (0..<k).map { d.extra[$0 * dims + 2] } : [], originalShape: shape))
            }
        case (.obb, _):
            obb = raw.map { d in
                let b = transform.scaleBox(xywh: d.box)
                return OrientedBox(xywhr: [b[0], b[1], b[2], b[3], d.extra.last ?? 0], conf: d.score, cls: d.cls,
                                   name: name(d.cls), originalShape: shape)
            }
        default:
            boxes = raw.map(box)
        }
        let done = DispatchTime.now().uptimeNanoseconds
        var result = Results(task: task, originalShape: shape, inputShape: input.shape, boxes: boxes, masks: masks,
                             keypoints: keypoints, obb: obb,
                             speed: Speed(preprocess: ms(start, preprocessed), inference: ms(preprocessed, inferred),
                                          postprocess: ms(inferred, done)),
                             image: image)
        result.lineWidth = config.lineWidth
        return result
    }

    /// The task to run for a request (nil: the one given at load): the model's own, or detect from
    /// a segment or pose model.
    func resolve(_ requested: YOLOTask?) throws -> YOLOTask {
        guard let requested = requested ?? loadedTask else { return task }
        return try Self.resolve(requested, of: task, model: url)
    }

    private static func resolve(_ requested: YOLOTask, of task: YOLOTask, model url: URL) throws -> YOLOTask {
        if requested == task || (requested == .detect && (task == .segment || task == .pose)) { return requested }
        throw YOLOError.taskMismatch(model: url.lastPathComponent, task: task.rawValue, requested: requested.rawValue)
    }

    /// Refuses an image size whose estimated working memory exceeds `budget`, before any of it
    /// is allocated, naming the largest size (a multiple of `stride`) that fits.
    private func checkMemory(_ size: Int, stride: Int, budget: Int, inputShape: (Int) -> (height: Int, width: Int)) throws {
        let perPixel = try bytesPerPixel.withLock { cached in
            if let cached { return cached }
            // The pass's own memory, plus the input tensor: 3 floats a pixel.
            let measured = try model.network.measureBytesPerPixel() + 12
            cached = measured
            return measured
        }
        func needed(_ s: Int) -> Double {
            let (h, w) = inputShape(s)
            return model.network.estimatedBytes(height: h, width: w, bytesPerPixel: perPixel)
        }
        guard needed(size) > Double(budget) else { return }
        // The estimate grows with the size: the largest number of strides that fits.
        var fits = 0, over = size / stride
        while over - fits > 1 {
            let mid = (fits + over) / 2
            if needed(mid * stride) <= Double(budget) { fits = mid } else { over = mid }
        }
        let (h, w) = inputShape(size)
        throw YOLOError.memoryBudgetExceeded(imageSize: size, height: h, width: w, needed: Int(needed(size)), budget: budget,
                                             largestFitting: fits * stride >= 32 ? fits * stride : nil)
    }

    private func name(_ cls: Int) -> String { cls >= 0 && cls < names.count ? names[cls] : "class\(cls)" }

    /// The network's output for `input`, run in a pooled workspace on `threads` threads (nil: the
    /// process's default): from the third prediction at an input size on (the first plans the
    /// workspace's arena, the second allocates it), the pass itself allocates nothing. Every input
    /// holds 8-bit pixels as k/255 (`Letterbox`, `ClassifyTransform`), so its bounds are 0…1.
    /// A cancelled pass throws before its next layer; its workspace, left mid-pass, is dropped.
    func infer(_ input: Tensor, _ selection: HeadSelection, threads: Int?, cancellation: Cancellation?) throws -> HeadOutput {
        let ws = workspaces.withLock { $0.popLast() } ?? Workspace()
        let head = HeadOutput(try Parallel.withWidth(threads) {
            try model.network.forward(input, in: ws, selection: selection, inputRange: ValueRange(lower: 0, upper: 1),
                                      isCancelled: cancellation.map { c in { c.isCancelled } })
        }, raw: false)
        checkIn(ws)
        return head
    }

    /// Returns a workspace to the pool. (Appending a captured value inside `withLock` does not
    /// pass the region checker; handing it over through a local mutex does.)
    private func checkIn(_ ws: consuming sending Workspace) {
        let handover = Mutex<Workspace?>(ws)
        workspaces.withLock { pool in
            if let ws = handover.withLock({ $0.take() }) { pool.append(ws) }
        }
    }

    private func invalidOutput(_ reason: String) -> YOLOError {
        .invalidModel(path: url.path, reason: "unexpected network output: " + reason)
    }

    /// The head's rows that pass the confidence, class filter and (legacy models) NMS, with the
    /// task's extra values, after checking the output has the shape the task implies. Cross-class
    /// priority suppression runs last, on the final boxes: of two classes overlapping, the lower priority goes.
    /// `multiLabel`: NMS keeps every class above the confidence per anchor (validation).
    func detections(_ head: HeadOutput, _ config: YOLOConfiguration, multiLabel: Bool = false) throws -> [RawDetection] {
        let output = head.output, nc = model.network.classCount
        let extra: Int
        switch task {
        case .segment:
            guard let protos = head.protos, protos.rank == 4, protos.shape[0] == 1 else {
                throw invalidOutput("a segment head without [1, m, h, w] prototypes")
            }
            extra = protos.shape[1]
        case .pose: extra = (model.architecture.kptShape ?? [17, 3]).reduce(1, *)
        case .obb: extra = 1
        default: extra = 0
        }
        if model.architecture.endToEnd {
            guard output.rank == 3, output.shape[0] == 1, output.shape[2] == 6 + extra else {
                throw invalidOutput("\(output.shape), expected [1, k, \(6 + extra)]")
            }
            return suppressByPriority(selectEndToEnd(output, config), config, rotated: task == .obb)
        }
        guard output.rank == 3, output.shape[0] == 1, output.shape[1] == 4 + nc + extra else {
            throw invalidOutput("\(output.shape), expected [1, \(4 + nc + extra), anchors]")
        }
        return suppressByPriority(nonMaxSuppression(output, config, classes: nc, rotated: task == .obb, multiLabel: multiLabel),
                                  config, rotated: task == .obb)
    }
}

/// Prints `CPU.slowBuildWarning` when first read: a global's initializer runs once, thread-safely.
private let slowBuildWarned: Void = {
    if let warning = CPU.slowBuildWarning { FileHandle.standardError.write(Data((warning + "\n").utf8)) }
}()

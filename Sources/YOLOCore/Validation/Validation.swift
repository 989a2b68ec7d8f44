import Dispatch
import Foundation
import Tensor
import YOLONet

/// A detection model's accuracy on a dataset split, as Ultralytics' `model.val()` reports it.
/// Encodes to JSON as `{"metrics": {"P", "R", "mAP50", "mAP50-95"}, "per_class": [...],
/// "speed_ms": {...}, "images", "instances", "dataset": {...}, "notes"}`.
public struct ValidationResults: Sendable, Equatable, Encodable {
    /// One class that has labels in the split.
    public struct ClassResult: Sendable, Equatable, Encodable {
        public var cls: Int
        public var name: String
        /// Images with at least one label of the class, and its labels.
        public var images: Int, instances: Int
        /// Precision and recall at the confidence of maximum mean F1; AP at IoU 0.5 and averaged over 0.5…0.95.
        public var precision: Double, recall: Double, mAP50: Double, mAP50to95: Double

        enum CodingKeys: String, CodingKey {
            case cls = "class", name, images, instances, precision = "P", recall = "R", mAP50, mAP50to95 = "mAP50-95"
        }
    }

    /// Means over the classes that have labels.
    public var precision: Double, recall: Double, mAP50: Double, mAP50to95: Double
    /// Images validated, and labels in them.
    public var images: Int, instances: Int
    /// Classes with labels, by index.
    public var classes: [ClassResult]
    /// Milliseconds per image.
    public var speed: Speed
    /// The label check of the split.
    public var dataset: DatasetScan
    /// Adjustments made, as Ultralytics warns of them (max_det raised, labels the model cannot predict skipped).
    public var notes: [String]
    /// Precision as a function of recall (`recallAxis`) at IoU 0.5, per entry of `classes`: the PR curves.
    public var precisionAtRecall: [[Double]]
    /// The recall axis of `precisionAtRecall`: 1000 points in 0…1.
    public var recallAxis: [Double] { confidenceSteps }
    /// The model's class names by index.
    public var names: [String]
    /// Ultralytics' confusion matrix at IoU 0.45: `[predicted][true]` over the model's classes
    /// plus background last (a missed label counts in the background row, a false detection in
    /// the background column).
    public var confusionMatrix: [[Int]]

    enum CodingKeys: String, CodingKey { case metrics, classes = "per_class", speed = "speed_ms", images, instances, dataset, notes }
    enum MetricKeys: String, CodingKey { case precision = "P", recall = "R", mAP50, mAP50to95 = "mAP50-95" }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        var metrics = container.nestedContainer(keyedBy: MetricKeys.self, forKey: .metrics)
        try metrics.encode(precision, forKey: .precision)
        try metrics.encode(recall, forKey: .recall)
        try metrics.encode(mAP50, forKey: .mAP50)
        try metrics.encode(mAP50to95, forKey: .mAP50to95)
        try container.encode(classes, forKey: .classes)
        try container.encode(speed, forKey: .speed)
        try container.encode(images, forKey: .images)
        try container.encode(instances, forKey: .instances)
        try container.encode(dataset, forKey: .dataset)
        try container.encode(notes, forKey: .notes)
    }
}

extension YOLO {
    /// Validates a detection model on a split of a dataset described by an Ultralytics data YAML,
    /// as Ultralytics 8.4.190's `model.val(data:, split:, batch:, imgsz:)` does: images sorted by
    /// aspect ratio into rectangular batches of `batch` (each image letterboxed to its batch's
    /// shape, so the metrics depend on `batch`), predictions at `confidence` (NMS at `iou` with
    /// every class above the confidence per box for one-to-many heads), matched to the labels at
    /// IoU 0.50…0.95, COCO's 101-point AP.
    ///
    /// ```swift
    /// let metrics = try await YOLO("yolo26n").val(data: "coco8.yaml")
    /// print(metrics.mAP50to95, metrics.classes.map(\.name))
    /// ```
    ///
    /// Corrupt images and label files are counted and reported in `dataset`, not thrown. Runs on
    /// the model's inference threads (see `predict(_:task:)`); cancelling the calling task stops
    /// it before the next layer and throws `CancellationError`.
    ///
    /// - Parameters:
    ///   - data: the dataset YAML file.
    ///   - split: the split to validate (`val`, `test`, `train`).
    ///   - batch: images per batch: each batch is letterboxed to one shape.
    ///   - imageSize: the long side, rounded up to a multiple of the stride.
    ///   - confidence: the confidence threshold.
    ///   - iou: the NMS IoU threshold.
    ///   - maxDetections: detections kept per image.
    ///   - progress: called after each image with (done, total), on an inference thread.
    public func val(data: String, split: String = "val", batch: Int = 16, imageSize: Int = 640,
                    confidence: Float = 0.001, iou: Float = 0.7, maxDetections: Int = 300,
                    progress: (@Sendable (Int, Int) -> Void)? = nil) async throws -> ValidationResults {
        try await InferenceExecutor.shared.run { cancellation in
            try self.validate(data: data, split: split, batch: batch, imageSize: imageSize, confidence: confidence,
                              iou: iou, maxDetections: maxDetections, progress: progress, cancellation: cancellation)
        }
    }

    private func validate(data: String, split: String, batch: Int, imageSize: Int, confidence: Float, iou: Float,
                          maxDetections: Int, progress: (@Sendable (Int, Int) -> Void)?,
                          cancellation: Cancellation) throws -> ValidationResults {
        guard task == .detect else {
            throw YOLOError.taskMismatch(model: url.lastPathComponent, task: task.rawValue, requested: "detect validation")
        }
        guard batch >= 1 else { throw YOLOError.invalidConfiguration(field: "batch", value: "\(batch)", reason: "must be at least 1") }
        var config = YOLOConfiguration()
        config.confidenceThreshold = confidence
        config.iouThreshold = iou
        config.maxDetections = maxDetections
        config.imageSize = imageSize
        config.threads = configuration.threads
        try config.validate()

        let dataset = try Dataset(contentsOf: URL(fileURLWithPath: data))
        let (labeled, scan) = try dataset.labeledImages(split: split, maxPixels: configuration.maxImagePixels)
        var images = labeled
        var notes = [String]()
        if names.count < dataset.names.count {
            notes.append("the model has \(names.count) classes and the dataset \(dataset.names.count): "
                         + "labels of classes \(names.count) and up are skipped")
            for i in images.indices {
                let keep = images[i].classes.indices.filter { images[i].classes[$0] < names.count }
                images[i].classes = keep.map { images[i].classes[$0] }
                images[i].boxes = keep.map { images[i].boxes[$0] }
            }
        }
        // Ultralytics raises the default max_det to the most labels in one image.
        let mostLabels = images.map(\.classes.count).max() ?? 0
        if mostLabels > config.maxDetections {
            notes.append("images have up to \(mostLabels) labels, more than max_det=\(config.maxDetections)"
                         + (config.maxDetections == 300 ? "; max_det raised to \(mostLabels)" : ""))
            if config.maxDetections == 300 { config.maxDetections = mostLabels }
        }

        let stride = model.network.maxStride
        let size = (imageSize + stride - 1) / stride * stride
        let order = images.indices.sorted {
            let a = Double(images[$0].height) / Double(images[$0].width), b = Double(images[$1].height) / Double(images[$1].width)
            return a < b || (a == b && $0 < $1)
        }
        images = order.map { images[$0] }
        let shapes = batchShapes(images.map { Double($0.height) / Double($0.width) }, batch: batch, size: size, stride: stride)

        var correct = [[Bool]](), scores = [Float](), predictedClasses = [Int](), labelClasses = [Int]()
        var imagesWithClass = [Int: Int]()
        var confusion = [[Int]](repeating: [Int](repeating: 0, count: names.count + 1), count: names.count + 1)
        var total = (preprocess: 0.0, inference: 0.0, postprocess: 0.0)
        for (n, item) in images.enumerated() {
            let start = DispatchTime.now().uptimeNanoseconds
            let (input, labelBoxes) = try validationInput(item, size: size, shape: shapes[n / batch])
            let preprocessed = DispatchTime.now().uptimeNanoseconds
            let head = try infer(input, HeadSelection(maxDetections: config.maxDetections), threads: config.threads,
                                 cancellation: cancellation)
            let inferred = DispatchTime.now().uptimeNanoseconds
            let found = try detections(head, config, multiLabel: true)
            let done = DispatchTime.now().uptimeNanoseconds
            total.preprocess += Double(preprocessed - start) / 1e6
            total.inference += Double(inferred - preprocessed) / 1e6
            total.postprocess += Double(done - inferred) / 1e6

            let iouMatrix = boxIoU(labelBoxes, found.map(\.box))
            correct += matchPredictions(predictedClasses: found.map(\.cls), labelClasses: item.classes, iou: iouMatrix)
            scores += found.map(\.score)
            predictedClasses += found.map(\.cls)
            labelClasses += item.classes
            for c in Set(item.classes) { imagesWithClass[c, default: 0] += 1 }
            updateConfusion(&confusion, iou: iouMatrix, predicted: found, labelClasses: item.classes, confidence: confidence)
            progress?(n + 1, images.count)
        }

        let metrics = ClassMetrics(correct: correct, confidence: scores, predictedClasses: predictedClasses, labelClasses: labelClasses)
        if labelClasses.isEmpty { notes.append("no labels found in the \(split) split, cannot compute metrics without labels") }
        let count = Double(images.count)
        return ValidationResults(
            precision: metrics.meanPrecision, recall: metrics.meanRecall, mAP50: metrics.mAP50, mAP50to95: metrics.mAP50to95,
            images: images.count, instances: labelClasses.count,
            classes: metrics.classes.indices.map { i in
                let c = metrics.classes[i]
                return ValidationResults.ClassResult(
                    cls: c, name: names[c], images: imagesWithClass[c] ?? 0,
                    instances: metrics.labelCounts[i], precision: metrics.precision[i], recall: metrics.recall[i],
                    mAP50: metrics.ap[i][0], mAP50to95: metrics.ap[i].reduce(0, +) / Double(metrics.ap[i].count))
            },
            speed: Speed(preprocess: total.preprocess / count, inference: total.inference / count,
                         postprocess: total.postprocess / count),
            dataset: scan, notes: notes, precisionAtRecall: metrics.precisionAtRecall, names: names,
            confusionMatrix: confusion)
    }

    /// The network input for one image of a batch whose letterbox shape is `shape`, and its labels
    /// as xyxy boxes in input pixels. As Ultralytics' validation loader: the long side resized
    /// to `size` (sides rounded up), then letterboxed into the batch shape without enlarging; the
    /// labels go through the same Float32 steps as its `LetterBox` and `Format` transforms.
    private func validationInput(_ item: LabeledImage, size: Int, shape: (height: Int, width: Int)) throws -> (Tensor, [SIMD4<Float>]) {
        let image = try Image(contentsOf: item.image, maxPixels: configuration.maxImagePixels)
        let r = Double(size) / Double(max(image.width, image.height))
        let width = r == 1 ? image.width : min(Int((Double(image.width) * r).rounded(.up)), size)
        let height = r == 1 ? image.height : min(Int((Double(image.height) * r).rounded(.up)), size)
        let t = Letterbox.transform(width: width, height: height, targetWidth: shape.width, targetHeight: shape.height,
                                    scaleUp: false, stride: nil)
        let input = t.input(image.resized(width: width, height: height))
        let ratio = Float(min(Double(shape.height) / Double(height), Double(shape.width) / Double(width), 1))
        let inputSize = SIMD4(Float(t.inputWidth), Float(t.inputHeight), Float(t.inputWidth), Float(t.inputHeight))
        let normalizer = SIMD4(Float(1 / Double(t.inputWidth)), Float(1 / Double(t.inputHeight)),
                               Float(1 / Double(t.inputWidth)), Float(1 / Double(t.inputHeight)))
        let labels = item.boxes.map { b -> SIMD4<Float> in
            func corners(_ b: SIMD4<Float>) -> SIMD4<Float> {
                let half = SIMD4(b[2], b[3], b[2], b[3]) / 2
                return SIMD4(b[0], b[1], b[0], b[1]) + half * SIMD4(-1, -1, 1, 1)
            }
            let xyxy = corners(b) * SIMD4(Float(width), Float(height), Float(width), Float(height)) * ratio
                + SIMD4(Float(t.left), Float(t.top), Float(t.left), Float(t.top))
            let xywh = SIMD4((xyxy[0] + xyxy[2]) / 2, (xyxy[1] + xyxy[3]) / 2, xyxy[2] - xyxy[0], xyxy[3] - xyxy[1])
            return corners(xywh * normalizer) * inputSize
        }
        return (input, labels)
    }
}

/// Ultralytics `set_rectangle`: for batches of `batch` consecutive images (sorted by aspect ratio
/// h / w), the letterbox shape fitting the batch's extreme ratios, each side
/// ceil(side · size / stride + 0.5) strides: up to a stride of padding beyond the image.
package func batchShapes(_ aspectRatios: [Double], batch: Int, size: Int, stride: Int) -> [(height: Int, width: Int)] {
    Swift.stride(from: 0, to: aspectRatios.count, by: batch).map { start in
        let ratios = aspectRatios[start..<min(start + batch, aspectRatios.count)]
        let low = ratios.min()!, high = ratios.max()!
        let (h, w): (Double, Double) = high < 1 ? (high, 1) : low > 1 ? (1, 1 / low) : (1, 1)
        func side(_ s: Double) -> Int { Int((s * Double(size) / Double(stride) + 0.5).rounded(.up)) * stride }
        return (side(h), side(w))
    }
}

/// Ultralytics `ConfusionMatrix.process_batch` for one image: detections above `confidence`,
/// in descending confidence, each claim the unclaimed label it overlaps most above IoU 0.45
/// whatever the classes; matched pairs count at [predicted][true], unmatched labels in the
/// background row, unmatched detections in the background column.
func updateConfusion(_ matrix: inout [[Int]], iou: [[Float]], predicted: [RawDetection], labelClasses: [Int], confidence: Float) {
    let background = matrix.count - 1
    let kept = predicted.indices.filter { predicted[$0].score > confidence }
    var overlap = iou
    var labelMatch = [Int?](repeating: nil, count: labelClasses.count)
    let candidates = kept.filter { j in overlap.contains { $0[j] > 0.45 } }
    for j in candidates.sorted(by: { predicted[$0].score > predicted[$1].score || (predicted[$0].score == predicted[$1].score && $0 < $1) }) {
        guard let best = overlap.indices.max(by: { overlap[$0][j] < overlap[$1][j] || (overlap[$0][j] == overlap[$1][j] && $0 > $1) }),
              overlap[best][j] > 0.45 else { continue }
        labelMatch[best] = j
        overlap[best] = [Float](repeating: 0, count: predicted.count)
    }
    for (i, c) in labelClasses.enumerated() {
        matrix[labelMatch[i].map { predicted[$0].cls } ?? background][c] += 1
    }
    let matched = Set(labelMatch.compactMap { $0 })
    for j in kept where !matched.contains(j) { matrix[predicted[j].cls][background] += 1 }
}

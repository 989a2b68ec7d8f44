import ArgumentParser
import Foundation
import YOLOCore

/// `yolo val`: a detection model's P, R, mAP50 and mAP50-95 on a dataset split, per class and
/// overall, printed as Ultralytics prints them.
struct Val: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Validate a detection model on a dataset split (Ultralytics data YAML): P, R, mAP50, mAP50-95.")

    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache; official names downloaded), .pt or .safetensors path, or http(s) URL.")
    var model: String = "yolo26n"

    @Option(help: "Dataset YAML (path, train, val, names).")
    var data: String

    @Option(help: "The split to validate: val, train or test.")
    var split: String = "val"

    @Option(help: "Images per rectangular batch; the batch shares one letterbox shape, so metrics depend on it.")
    var batch: Int = 16

    @Option(help: "Long side of the network input.")
    var imgsz: Int = 640

    @Option(help: "Minimum confidence, 0…1.")
    var conf: Float = 0.001

    @Option(help: "NMS IoU threshold, 0…1 (legacy models).")
    var iou: Float = 0.7

    @Option(name: .customLong("max-det"), help: "Most detections per image.")
    var maxDet: Int = 300

    @Option(name: .customLong("save-json"), help: "Write the metrics to this JSON file.")
    var saveJSON: String?

    @Flag(help: "Save the PR curve and the confusion matrix as PNG files in the run folder (runs/detect/val, …).")
    var plots = false

    @Option(help: "Threads the kernels use (default: YOLO_NUM_THREADS, else one per core).")
    var threads: Int?

    @Option(help: "The convolutions' arithmetic: fp32 (PyTorch's results) or int8 (faster, close to fp32).")
    var precision: YOLOPrecision = .fp32

    @OptionGroup var runFolder: RunFolderOptions

    func run() async throws {
        do {
            var configuration = try YOLOConfiguration.fromEnvironment()
            configuration.threads = threads ?? configuration.threads
            let yolo = try await YOLO(model, configuration: configuration, precision: precision)
            let runDirectory = plots ? try runFolder.make(task: yolo.task.rawValue, verb: "val") : nil
            // A JSON file that cannot be written fails before the validation, not after it.
            if let saveJSON {
                guard let file = fopen(saveJSON, "w") else {
                    throw CommandFailure(message: "cannot write --save-json \(saveJSON): \(String(cString: strerror(errno)))")
                }
                fclose(file)
            }
            let showProgress = isatty(STDERR_FILENO) == 1
            let results = try await yolo.val(data: data, split: split, batch: batch, imageSize: imgsz, confidence: conf,
                                             iou: iou, maxDetections: maxDet) { done, total in
                guard showProgress else { return }
                FileHandle.standardError.write(Data("\r\(done)/\(total) images\(done == total ? "\n" : "")".utf8))
            }
            print("val: \(split) split of \(data): \(results.dataset.summary)")
            for warning in results.dataset.warnings + results.notes {
                FileHandle.standardError.write(Data("WARNING ⚠️ \(warning)\n".utf8))
            }
            print(results.table(classNames: yolo.names.count > 1))
            let s = results.speed
            print(String(format: "Speed: %.1fms preprocess, %.1fms inference, 0.0ms loss, %.1fms postprocess per image",
                         s.preprocess, s.inference, s.postprocess))
            if let saveJSON {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                do {
                    try encoder.encode(results).write(to: URL(fileURLWithPath: saveJSON))
                } catch {
                    throw CommandFailure(message: "cannot write --save-json \(saveJSON): \(error.localizedDescription)")
                }
                print("Results saved to \(saveJSON)")
            }
            if let runDirectory {
                try results.precisionRecallPlot().write(to: runDirectory.appendingPathComponent("BoxPR_curve.png"))
                try results.confusionMatrixPlot(normalized: true)
                    .write(to: runDirectory.appendingPathComponent("confusion_matrix_normalized.png"))
                try results.confusionMatrixPlot(normalized: false).write(to: runDirectory.appendingPathComponent("confusion_matrix.png"))
                print("Results saved to \(runDirectory.path)")
            }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure(error)
        }
    }
}

extension ValidationResults {
    /// Ultralytics' table: a header, the `all` row, then (`classNames`) a row per class with labels.
    func table(classNames: Bool) -> String {
        // Python's "%22s" and "%11s": right-aligned, counted in characters.
        func pad(_ text: String, _ width: Int) -> String { String(repeating: " ", count: max(0, width - text.count)) + text }
        func row(_ name: String, _ images: Int, _ instances: Int, _ values: [Double]) -> String {
            pad(name, 22) + pad("\(images)", 11) + pad("\(instances)", 11) + values.map { String(format: "%11.3g", $0) }.joined()
        }
        let header = pad("Class", 22) + ["Images", "Instances", "Box(P", "R", "mAP50", "mAP50-95)"].map { pad($0, 11) }.joined()
        var lines = [header, row("all", images, instances, [precision, recall, mAP50, mAP50to95])]
        if classNames {
            lines += classes.map { row($0.name, $0.images, $0.instances, [$0.precision, $0.recall, $0.mAP50, $0.mAP50to95]) }
        }
        return lines.joined(separator: "\n")
    }
}

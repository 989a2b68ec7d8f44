import ArgumentParser
import Foundation
import YOLOCore

/// `yolo predict`: detections for files, folders or glob patterns, printed like Ultralytics
/// and optionally saved as annotated images, label files and JSON.
struct Predict: AsyncParsableCommand {
    static let configuration = CommandConfiguration(abstract: "Detect objects in images.")

    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache) or .safetensors path.")
    var model: String = "yolo26n"

    @Option(help: "An image file, a folder of images, or a glob pattern such as 'images/*.jpg'.")
    var source: String

    @Option(help: "Minimum confidence, 0…1.")
    var conf: Float = 0.25

    @Option(help: "NMS IoU threshold, 0…1 (legacy models).")
    var iou: Float = 0.7

    @Option(name: .customLong("max-det"), help: "Most detections per image.")
    var maxDet: Int = 300

    @Option(help: "Keep only these class indices, comma-separated.")
    var classes: String?

    @Option(help: "Long side of the network input (default: the model's training size).")
    var imgsz: Int?

    @Flag(help: "Save annotated images.")
    var save = false

    @Flag(name: .customLong("save-txt"), help: "Save YOLO label files (cls cx cy w h conf, normalized).")
    var saveTxt = false

    @Option(name: .customLong("save-json"), help: "Write all results to this JSON file.")
    var saveJSON: String?

    @Option(help: "Folder for saved runs.")
    var project: String = "runs/predict"

    @Option(help: "Run name inside the project folder; exp, exp2, … when taken.")
    var name: String = "exp"

    func run() async throws {
        do {
            var config = YOLOConfiguration()
            config.confidence = conf
            config.iou = iou
            config.maxDetections = maxDet
            config.imageSize = imgsz
            if let classes {
                config.classes = try classes.split(separator: ",").map {
                    guard let c = Int($0.trimmingCharacters(in: .whitespaces)) else {
                        throw YOLOError.invalidConfiguration(field: "classes", value: classes, reason: "not a list of integers")
                    }
                    return c
                }
            }
            let yolo = try await YOLO(model, configuration: config)
            let files = try imageFiles(source)
            let saveDirectory = save || saveTxt ? try makeRunDirectory() : nil
            var results = [DetectionResult]()
            for (i, file) in files.enumerated() {
                let result = try await yolo.predict(file.path)
                results.append(result)
                print("image \(i + 1)/\(files.count) \(file.path): \(result.inputShape[2])x\(result.inputShape[3]) "
                      + summary(result) + String(format: "%.1fms", result.speed.inference))
                if let saveDirectory {
                    if save { try result.annotated().write(to: saveDirectory.appendingPathComponent(file.lastPathComponent)) }
                    if saveTxt { try writeLabels(result, for: file, in: saveDirectory) }
                }
            }
            let n = Double(max(results.count, 1))
            let mean = { (f: (Speed) -> Double) in results.map { f($0.speed) }.reduce(0, +) / n }
            print(String(format: "Speed: %.1fms preprocess, %.1fms inference, %.1fms postprocess per image",
                         mean(\.preprocess), mean(\.inference), mean(\.postprocess)))
            if let saveJSON {
                let encoder = JSONEncoder()
                encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
                try encoder.encode(results).write(to: URL(fileURLWithPath: saveJSON))
                print("Results saved to \(saveJSON)")
            }
            if let saveDirectory { print("Results saved to \(saveDirectory.path)") }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure(error)
        }
    }

    /// "4 persons, 1 bus, " in class-index order, as Ultralytics prints it.
    private func summary(_ result: DetectionResult) -> String {
        guard !result.boxes.isEmpty else { return "(no detections), " }
        var counts = [Int: (name: String, n: Int)]()
        for box in result.boxes { counts[box.cls, default: (box.name, 0)].n += 1 }
        return counts.keys.sorted().map { c in
            let (name, n) = counts[c]!
            return "\(n) \(name)\(n > 1 ? "s" : ""), "
        }.joined()
    }

    /// A file, every JPEG/PNG in a folder (sorted), or the matches of a glob pattern.
    private func imageFiles(_ source: String) throws -> [URL] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        let isImage = { (path: String) in ["jpg", "jpeg", "png"].contains((path as NSString).pathExtension.lowercased()) }
        if fm.fileExists(atPath: source, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { return [URL(fileURLWithPath: source)] }
            let names = try fm.contentsOfDirectory(atPath: source).filter(isImage).sorted()
            guard !names.isEmpty else { throw CommandFailure(message: "no JPEG or PNG images in folder \(source)") }
            return names.map { URL(fileURLWithPath: source).appendingPathComponent($0) }
        }
        var matches = glob_t()
        defer { globfree(&matches) }
        guard glob(source, 0, nil, &matches) == 0 else { throw CommandFailure(message: "source \(source) does not exist") }
        let paths = (0..<Int(matches.gl_pathc)).compactMap { matches.gl_pathv[$0].map { String(cString: $0) } }.filter(isImage)
        guard !paths.isEmpty else { throw CommandFailure(message: "no JPEG or PNG images match \(source)") }
        return paths.sorted().map { URL(fileURLWithPath: $0) }
    }

    /// project/name, or project/name2, name3, … if it exists (Ultralytics `increment_path`).
    private func makeRunDirectory() throws -> URL {
        let fm = FileManager.default
        let base = URL(fileURLWithPath: project)
        var candidate = base.appendingPathComponent(name)
        var n = 2
        while fm.fileExists(atPath: candidate.path) {
            candidate = base.appendingPathComponent("\(name)\(n)")
            n += 1
        }
        try fm.createDirectory(at: candidate, withIntermediateDirectories: true)
        return candidate
    }

    /// labels/<stem>.txt: one "cls cx cy w h conf" line per box, normalized to 0…1.
    private func writeLabels(_ result: DetectionResult, for file: URL, in directory: URL) throws {
        let labels = directory.appendingPathComponent("labels")
        try FileManager.default.createDirectory(at: labels, withIntermediateDirectories: true)
        let lines = result.boxes.map { box in
            ([String(box.cls)] + (box.xywhn + [box.conf]).map { String(format: "%.6g", $0) }).joined(separator: " ")
        }
        let text = lines.joined(separator: "\n") + (lines.isEmpty ? "" : "\n")
        try text.write(to: labels.appendingPathComponent(file.deletingPathExtension().lastPathComponent + ".txt"),
                       atomically: true, encoding: .utf8)
    }
}

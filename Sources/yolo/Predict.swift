import ArgumentParser
import Foundation
import YOLOCore

/// `yolo predict`: a model's results (boxes, masks, keypoints, rotated boxes or classes, by the
/// model's task) for files, folders or glob patterns, printed like Ultralytics and optionally
/// saved as annotated images, label files and JSON.
struct Predict: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a model on images: detect, segment, pose, obb or classify, as the model was trained.")

    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache), .safetensors path or http(s) URL.")
    var model: String = "yolo26n"

    @Option(help: ArgumentHelp("The task expected of the model: detect, segment, pose, obb or classify.",
                               discussion: "Default: the model's own. Another task is an error, except detect from a segment or pose model (boxes only)."))
    var task: String?

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

    @Flag(name: .customLong("save-txt"), help: ArgumentHelp(
        "Save label files in Ultralytics' formats, coordinates normalized, confidence last.",
        discussion: """
        detect: cls cx cy w h conf; segment: cls x1 y1 x2 y2 … conf (outline); pose: cls cx cy w h \
        kx ky kv … conf; obb: cls x1 y1 x2 y2 x3 y3 x4 y4 conf (corners); classify: "conf name" for \
        the top 5.
        """))
    var saveTxt = false

    @Option(name: .customLong("save-json"), help: "Write all results to this JSON file (an array, written as images finish).")
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
            let requested = try task.map { name in
                guard let task = YOLOTask(rawValue: name) else {
                    throw CommandFailure(message: "unknown task '\(name)'; use detect, segment, pose, obb or classify")
                }
                return task
            }
            let json = try saveJSON.map { try JSONStream(path: $0) }
            let yolo = try await YOLO(model, configuration: config)
            let files = try imageFiles(source)
            let saveDirectory = save || saveTxt ? try makeRunDirectory() : nil
            // Each result is written as it completes and dropped: memory stays that of one image.
            var done = 0, skipped = 0, total = (preprocess: 0.0, inference: 0.0, postprocess: 0.0)
            for (i, file) in files.enumerated() {
                let result: Results
                do {
                    result = try await yolo.predict(file.path, task: requested)
                } catch let error as ImageError where files.count > 1 {
                    // As Ultralytics does: an unreadable image is reported and the batch goes on.
                    skipped += 1
                    FileHandle.standardError.write(Data(
                        "WARNING ⚠️ image \(i + 1)/\(files.count) skipped: \(error.localizedDescription)\n".utf8))
                    continue
                }
                done += 1
                total.preprocess += result.speed.preprocess
                total.inference += result.speed.inference
                total.postprocess += result.speed.postprocess
                print("image \(i + 1)/\(files.count) \(file.path): \(result.inputShape[2])x\(result.inputShape[3]) "
                      + result.summary + String(format: "%.1fms", result.speed.inference))
                try json?.append(result)
                if let saveDirectory {
                    if save { try result.annotated().write(to: saveDirectory.appendingPathComponent(file.lastPathComponent)) }
                    if saveTxt { try writeLabels(result, for: file, in: saveDirectory) }
                }
            }
            try json?.close()
            guard done > 0 else { throw CommandFailure(message: "none of the \(files.count) images could be read") }
            let n = Double(done)
            print(String(format: "Speed: %.1fms preprocess, %.1fms inference, %.1fms postprocess per image",
                         total.preprocess / n, total.inference / n, total.postprocess / n))
            print("\(files.count) images, \(skipped) skipped")
            if let saveJSON { print("Results saved to \(saveJSON)") }
            if let saveDirectory { print("Results saved to \(saveDirectory.path)") }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure(error)
        }
    }

    /// A file, every image in a folder (sorted), or the matches of a glob pattern. Images are
    /// files with Ultralytics' image extensions (and GIF): those not JPEG or PNG inside are
    /// reported as skipped, not passed over.
    private func imageFiles(_ source: String) throws -> [URL] {
        let fm = FileManager.default
        var isDirectory: ObjCBool = false
        let extensions: Set = ["jpg", "jpeg", "png", "bmp", "dng", "mpo", "tif", "tiff", "webp", "pfm", "heic", "gif"]
        let isImage = { (path: String) in extensions.contains((path as NSString).pathExtension.lowercased()) }
        if fm.fileExists(atPath: source, isDirectory: &isDirectory) {
            guard isDirectory.boolValue else { return [URL(fileURLWithPath: source)] }
            let names = try fm.contentsOfDirectory(atPath: source).filter(isImage).sorted()
            guard !names.isEmpty else { throw CommandFailure(message: "no images in folder \(source)") }
            return names.map { URL(fileURLWithPath: source).appendingPathComponent($0) }
        }
        var matches = glob_t()
        defer { globfree(&matches) }
        guard glob(source, 0, nil, &matches) == 0 else { throw CommandFailure(message: "source \(source) does not exist") }
        let paths = (0..<Int(matches.gl_pathc)).compactMap { matches.gl_pathv[$0].map { String(cString: $0) } }.filter(isImage)
        guard !paths.isEmpty else { throw CommandFailure(message: "no images match \(source)") }
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
        // mkdir -p by hand: Foundation's errors on Linux do not say why.
        var path = project.hasPrefix("/") ? "" : "."
        for component in candidate.path.dropFirst(base.path.count - project.count).split(separator: "/") {
            path += "/" + component
            guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
                throw CommandFailure(message: "cannot create the run folder \(project)/\(candidate.lastPathComponent): "
                                     + String(cString: strerror(errno)))
            }
        }
        return candidate
    }

    /// labels/<stem>.txt in Ultralytics' `save_txt` formats with `save_conf`, numbers as `%g`:
    /// detect "cls cx cy w h conf"; segment "cls x1 y1 … conf" (the outline; objects whose
    /// outline has fewer than 3 points are left out); pose "cls cx cy w h kx ky kv … conf"; obb
    /// "cls x1 y1 … x4 y4 conf"; classify "conf name" per top-5 class. No file when no line.
    private func writeLabels(_ result: Results, for file: URL, in directory: URL) throws {
        func g(_ v: Float) -> String { String(format: "%g", Double(v)) }
        var lines = [String]()
        switch result.task {
        case .classify:
            if let probs = result.probs {
                lines = zip(probs.top5conf, probs.top5names).map { String(format: "%.2f", Double($0)) + " " + $1 }
            }
        case .obb:
            lines = result.obb.map { box in
                ([String(box.cls)] + box.xyxyxyxyn.flatMap { [$0.x, $0.y] }.map(g) + [g(box.conf)]).joined(separator: " ")
            }
        case .segment:
            lines = zip(result.boxes, result.masks).compactMap { box, mask in
                let outline = mask.xyn
                guard outline.count >= 3 else { return nil }
                return ([String(box.cls)] + outline.flatMap { [$0.x, $0.y] }.map(g) + [g(box.conf)]).joined(separator: " ")
            }
        case .pose:
            lines = zip(result.boxes, result.keypoints).map { box, k in
                let points = k.xyn.indices.flatMap { i in [k.xyn[i].x, k.xyn[i].y] + (k.conf.count == k.xy.count ? [k.conf[i]] : []) }
                return ([String(box.cls)] + (box.xywhn + points + [box.conf]).map(g)).joined(separator: " ")
            }
        case .detect:
            lines = result.boxes.map { box in ([String(box.cls)] + (box.xywhn + [box.conf]).map(g)).joined(separator: " ") }
        }
        guard !lines.isEmpty else { return }
        let labels = directory.appendingPathComponent("labels")
        try FileManager.default.createDirectory(at: labels, withIntermediateDirectories: true)
        try (lines.joined(separator: "\n") + "\n").write(
            to: labels.appendingPathComponent(file.deletingPathExtension().lastPathComponent + ".txt"), atomically: true, encoding: .utf8)
    }
}

/// A JSON array written one element at a time. The file is created at once, so a path that
/// cannot be written fails before any inference.
final class JSONStream {
    private let path: String
    private let file: UnsafeMutablePointer<FILE>
    private var count = 0
    private let encoder = JSONEncoder()

    init(path: String) throws {
        guard let file = fopen(path, "w") else {
            throw CommandFailure(message: "cannot write --save-json \(path): \(String(cString: strerror(errno)))")
        }
        (self.path, self.file) = (path, file)
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
    }

    deinit { fclose(file) }

    func append(_ value: some Encodable) throws {
        try write((count == 0 ? "[\n" : ",\n") + String(decoding: try encoder.encode(value), as: UTF8.self))
        count += 1
    }

    func close() throws {
        try write(count == 0 ? "[]\n" : "\n]\n")
        guard fflush(file) == 0 else { throw failure() }
    }

    private func write(_ text: String) throws {
        guard fputs(text, file) >= 0 else { throw failure() }
    }

    private func failure() -> CommandFailure {
        CommandFailure(message: "cannot write --save-json \(path): \(String(cString: strerror(errno)))")
    }
}

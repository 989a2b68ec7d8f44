import Foundation

/// A model `YOLO.availableModels` lists: an official name (on this machine or downloadable) or a
/// weight file of one's own.
public struct ModelInfo: Sendable, Equatable {
    /// The groups of a model selector, in its order.
    public enum Group: String, Sendable, CaseIterable {
        /// YOLOv3u, YOLOv5u, YOLOv9, YOLOv10, YOLO12.
        case legacy
        /// YOLOv8, every task.
        case yolov8 = "YOLOv8 family"
        /// YOLO11 and YOLO26, every task.
        case yolo11And26 = "YOLO11/26"
        /// Weight files that are not an official model.
        case custom
    }

    /// What `YOLO(_:)` loads it by: the official name, or the file's path.
    public let name: String
    /// "YOLO26", "YOLO11", "YOLOv8", "YOLOv5u", …, or "custom".
    public let family: String
    /// The task its name says (`-seg`, `-pose`, `-obb`, `-cls`, else detect); for a custom file
    /// nil when its name says none.
    public let task: YOLOTask?
    /// The scale ("n", "s", "m", "b", "l", "x", "t", "c", "e"); nil for custom files and YOLOv3u.
    public let size: String?
    public let group: Group
    /// The weight file on this machine; nil for an official model that would be downloaded.
    public let file: URL?
}

extension ModelInfo {
    /// Ultralytics 8.4.190's release assets in the families and tasks yolo-swift runs
    /// (`GITHUB_ASSETS_NAMES`), in selector order.
    static let official: [ModelInfo] = {
        var models = [ModelInfo]()
        func add(_ family: String, _ group: Group, _ sizes: String, _ name: (String) -> String, suffixes: [String] = [""]) {
            for suffix in suffixes {
                for size in sizes.map(String.init) {
                    models.append(ModelInfo(name: name(size) + suffix, family: family, task: task(of: suffix), size: size, group: group, file: nil))
                }
            }
        }
        let tasks = ["", "-seg", "-pose", "-obb", "-cls"]
        for name in ["yolov3u", "yolov3-sppu", "yolov3-tinyu"] {
            models.append(ModelInfo(name: name, family: "YOLOv3u", task: .detect, size: nil, group: .legacy, file: nil))
        }
        add("YOLOv5u", .legacy, "nsmlx") { "yolov5\($0)u" }
        add("YOLOv5u", .legacy, "nsmlx") { "yolov5\($0)6u" }
        add("YOLOv9", .legacy, "tsmce") { "yolov9\($0)" }
        add("YOLOv9", .legacy, "ce", { "yolov9\($0)" }, suffixes: ["-seg"])
        add("YOLOv10", .legacy, "nsmblx") { "yolov10\($0)" }
        add("YOLO12", .legacy, "nsmlx") { "yolo12\($0)" }
        add("YOLOv8", .yolov8, "nsmlx", { "yolov8\($0)" }, suffixes: tasks + ["-oiv7"])
        add("YOLO11", .yolo11And26, "nsmlx", { "yolo11\($0)" }, suffixes: tasks)
        add("YOLO26", .yolo11And26, "nsmlx", { "yolo26\($0)" }, suffixes: tasks)
        return models
    }()

    /// The official names, for `ModelStore.isOfficial`.
    static let officialNames = Set(official.map(\.name))

    /// The task a name's suffix says; nil without one of the task suffixes.
    static func task(of suffix: String) -> YOLOTask? {
        switch suffix {
        case "-seg": .segment
        case "-pose": .pose
        case "-obb": .obb
        case "-cls": .classify
        case "", "-oiv7": .detect
        default: nil
        }
    }
}

extension YOLO {
    /// The models a model selector offers, grouped as `ModelInfo.Group` orders them: every
    /// official name (with its file when on this machine: `store`'s search directories or cache),
    /// then the `.pt` and `.safetensors` files in the search directories, and the cache's
    /// downloads by URL, that are no official model (`custom`, by path). Reads only directory
    /// listings, never a weight file. `store` nil reads `ModelStore.fromEnvironment()`.
    public static func availableModels(store: ModelStore? = nil) throws -> [ModelInfo] {
        let store = try store ?? .fromEnvironment()
        let official = ModelInfo.official.map { model in
            ModelInfo(name: model.name, family: model.family, task: model.task, size: model.size, group: model.group,
                      file: try? store.url(for: model.name, downloading: false))
        }
        let fm = FileManager.default
        var custom = [ModelInfo]()
        for directory in store.searchDirectories + [store.cacheDirectory] {
            let names = ((try? fm.contentsOfDirectory(atPath: directory.path)) ?? []).sorted()
            for file in names where file.hasSuffix(".pt") || file.hasSuffix(".safetensors") {
                let url = directory.appendingPathComponent(file)
                guard !official.contains(where: { $0.file?.standardizedFileURL == url.standardizedFileURL }) else { continue }
                // A download is cached as "<16 hex digits>-<its name>".
                let stem = url.deletingPathExtension().lastPathComponent
                let name = directory == store.cacheDirectory ? String(stem.drop { $0 != "-" }.dropFirst()) : stem
                let suffix = ["-seg", "-pose", "-obb", "-cls"].first { name.hasSuffix($0) } ?? "none"
                custom.append(ModelInfo(name: url.path, family: "custom", task: ModelInfo.task(of: suffix), size: nil,
                                        group: .custom, file: url))
            }
        }
        return ModelInfo.Group.allCases.flatMap { group in official.filter { $0.group == group } } + custom
    }
}

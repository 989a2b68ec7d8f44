import Foundation
import Tensor

/// A network together with what its weight file says about it.
package struct Model: Sendable {
    package let network: Network
    package let architecture: Architecture
    package let task: ModelTask
    /// Class names by index.
    package let names: [String]
    /// Training image size, the default inference size.
    package let imageSize: Int
    package let metadata: [String: String]

    /// Loads a `yolo-safetensors/1` file or an Ultralytics `.pt` checkpoint (told apart by content):
    /// every tensor bound by name with its shape checked; missing or leftover tensors are errors.
    package init(contentsOf url: URL, precision: Precision = .fp32) throws {
        try self.init(file: try SafeTensorsFile(contentsOf: url), precision: precision)
    }

    package init(file: SafeTensorsFile, precision: Precision = .fp32) throws {
        let metadata = file.metadata
        func required(_ key: String) throws -> String {
            guard let value = metadata[key] else { throw ModelError.missingMetadata(key: key) }
            return value
        }
        var architecture = try Architecture(json: try required("arch"))
        let taskName = metadata["task"] ?? "detect"
        guard let task = ModelTask(rawValue: taskName) else {
            throw ModelError.invalidMetadata(key: "task", value: taskName, reason: "not one of detect, segment, pose, obb, classify")
        }
        if let flag = metadata["end2end"] {
            guard let e2e = Bool(flag) else { throw ModelError.invalidMetadata(key: "end2end", value: flag, reason: "not true or false") }
            architecture.endToEnd = e2e
        }
        var weights = try FileWeights(file: file, precision: precision)
        network = try Network(architecture: architecture, weights: &weights)
        let unused = weights.unused
        guard unused.isEmpty else { throw ModelError.unusedTensors(names: unused) }
        guard network.task == task else {
            throw ModelError.invalidMetadata(key: "task", value: taskName, reason: "the architecture's head does \(network.task)")
        }
        names = try Self.parseNames(metadata["names"], count: network.classCount)
        if let text = metadata["imgsz"] {
            let first = text.trimmingCharacters(in: CharacterSet(charactersIn: "[] ")).split(separator: ",").first
            guard let size = first.flatMap({ Int($0.trimmingCharacters(in: .whitespaces)) }), (32...8192).contains(size) else {
                throw ModelError.invalidMetadata(key: "imgsz", value: text, reason: "not an image size in 32...8192")
            }
            imageSize = size
        } else {
            imageSize = 640
        }
        self.architecture = architecture
        self.task = task
        self.metadata = metadata
    }

    /// `names` is a JSON object from class index (as a string) to name; absent means "class<i>".
    static func parseNames(_ json: String?, count: Int) throws -> [String] {
        guard let json else { return (0..<count).map { "class\($0)" } }
        guard let object = try? JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: String] else {
            throw ModelError.invalidMetadata(key: "names", value: json, reason: "not a JSON object of index → name")
        }
        return try (0..<count).map { i in
            guard let name = object[String(i)] else {
                throw ModelError.invalidMetadata(key: "names", value: json, reason: "no name for class \(i) of \(count)")
            }
            return name
        }
    }
}

import Foundation

/// Everything that can go wrong between a model name or image and a result.
public enum YOLOError: Error, LocalizedError, Equatable {
    /// No weight file for `name` in any of `searched`.
    case modelNotFound(name: String, searched: [String])
    /// The weight file could not be read or does not fit its architecture.
    case invalidModel(path: String, reason: String)
    /// The model was trained for another task than the one asked of it.
    case taskMismatch(model: String, task: String, requested: String)
    /// A configuration value is out of range.
    case invalidConfiguration(field: String, value: String, reason: String)
    /// An image could not be used as input.
    case invalidImage(source: String, reason: String)
    /// A download failed or did not match its checksum.
    case downloadFailed(url: String, reason: String)
    /// A prediction at `imageSize` (a `height`×`width` input) would need more working memory than
    /// the budget; `largestFitting` is the largest image size that fits (nil: none).
    case memoryBudgetExceeded(imageSize: Int, height: Int, width: Int, needed: Int, budget: Int, largestFitting: Int?)
    /// The official model `name` is not on this machine and the store is offline (`ModelStore.offline`,
    /// `YOLO_OFFLINE=1`).
    case offline(name: String, url: String, directories: [String])

    public var errorDescription: String? {
        switch self {
        case let .modelNotFound(name, searched):
            "model '\(name)' not found; looked for " + searched.joined(separator: ", ")
                + " (set YOLO_WEIGHTS_DIR or put the .safetensors or .pt file in Weights/)"
        case let .invalidModel(path, reason):
            "cannot load model \(path): \(reason)"
        case let .taskMismatch(model, task, requested):
            "model \(model) is a \(task) model; it cannot do \(requested)"
        case let .invalidConfiguration(field, value, reason):
            "configuration \(field) = \(value) is invalid: \(reason)"
        case let .invalidImage(source, reason):
            "cannot use image \(source): \(reason)"
        case let .downloadFailed(url, reason):
            "download of \(url) failed: \(reason)"
        case let .offline(name, url, directories):
            "model '\(name)' is not on this machine and offline mode (YOLO_OFFLINE=1) forbids downloading it from \(url); place "
                + "\(name).pt (that file) or \(name).safetensors in " + directories.joined(separator: " or ")
        case let .memoryBudgetExceeded(imageSize, height, width, needed, budget, largestFitting):
            "image size \(imageSize) (a \(width)×\(height) input) needs about \(gigabytes(needed)) of working memory, more than "
                + "the budget of \(gigabytes(budget)) (YOLOConfiguration.memoryBudget, by default half the memory available); "
                + (largestFitting.map { "image size \($0) or less fits" } ?? "no image size fits")
        }
    }
}

private func gigabytes(_ bytes: Int) -> String { String(format: "%.2f GB", Double(bytes) / 1e9) }

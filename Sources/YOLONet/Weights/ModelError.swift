import Foundation

/// Why a model could not be built from its weight file, or run on an input.
package enum ModelError: Error, LocalizedError, Equatable {
    case missingMetadata(key: String)
    case invalidMetadata(key: String, value: String, reason: String)
    case invalidArchitecture(layer: Int, reason: String)
    case unknownModule(layer: Int, module: String)
    case missingTensor(name: String, expectedShape: [Int])
    case shapeMismatch(name: String, expected: [Int], actual: [Int])
    case unusedTensors(names: [String])
    case invalidInput(shape: [Int], reason: String)

    package var errorDescription: String? {
        switch self {
        case let .missingMetadata(key):
            "the weight file has no '\(key)' metadata; read the Ultralytics .pt checkpoint directly "
                + "or write the file with `yolo export`"
        case let .invalidMetadata(key, value, reason):
            "metadata '\(key)' = \(value.prefix(120)) is invalid: \(reason)"
        case let .invalidArchitecture(layer, reason):
            "architecture layer \(layer) is invalid: \(reason)"
        case let .unknownModule(layer, module):
            "architecture layer \(layer) uses module '\(module)', which yolo-swift does not implement"
        case let .missingTensor(name, expectedShape):
            "the weight file has no tensor '\(name)' (expected shape \(expectedShape))"
        case let .shapeMismatch(name, expected, actual):
            "tensor '\(name)' has shape \(actual) but the architecture needs \(expected)"
        case let .unusedTensors(names):
            "the weight file has \(names.count) tensor(s) the architecture does not use, e.g. "
                + names.prefix(5).map { "'\($0)'" }.joined(separator: ", ")
        case let .invalidInput(shape, reason):
            "input of shape \(shape) is invalid: \(reason)"
        }
    }
}

import Foundation

/// Test data that is not where the tests look for it: a failure, never a skip.
public struct MissingTestData: Error, CustomStringConvertible {
    public let path: String
    public var description: String { "test data not found at \(path); set YOLO_SHARED_DIR / YOLO_WEIGHTS_DIR" }
}

/// `YOLO_SHARED_DIR`, or `../shared` beside the package root as on CI.
public func sharedDirectory() throws -> URL {
    let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let url = ProcessInfo.processInfo.environment["YOLO_SHARED_DIR"].map { URL(fileURLWithPath: $0) }
        ?? packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw MissingTestData(path: url.path)
    }
    return url
}

/// A file or folder of the shared test data, e.g. `images/bus.jpg`.
public func sharedFile(_ path: String) throws -> URL {
    let url = try sharedDirectory().appendingPathComponent(path)
    guard FileManager.default.fileExists(atPath: url.path) else { throw MissingTestData(path: url.path) }
    return url
}

/// The weights directory: `YOLO_WEIGHTS_DIR`, else the shared `weights/`.
public func weightsDirectory() throws -> URL {
    try ProcessInfo.processInfo.environment["YOLO_WEIGHTS_DIR"].map { URL(fileURLWithPath: $0) }
        ?? sharedDirectory().appendingPathComponent("weights")
}

/// A weight file: `name` with its extension (`yolo26n-w8.pt`), or a model name (`yolo26n`) for
/// its `.safetensors`.
public func weightsFile(_ name: String) throws -> URL {
    let file = name.contains(".") ? name : name + ".safetensors"
    let url = try weightsDirectory().appendingPathComponent(file)
    guard FileManager.default.fileExists(atPath: url.path) else { throw MissingTestData(path: url.path) }
    return url
}

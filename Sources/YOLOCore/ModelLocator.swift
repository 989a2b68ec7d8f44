import Foundation

/// Finds weight files: a path as given, else `<name>.safetensors` in `YOLO_WEIGHTS_DIR`, then
/// `Weights/` under the current directory, then the download cache.
public enum ModelLocator {
    /// The directories searched for a bare model name, in order.
    public static var searchDirectories: [URL] {
        var directories = [URL]()
        if let dir = ProcessInfo.processInfo.environment["YOLO_WEIGHTS_DIR"], !dir.isEmpty {
            directories.append(URL(fileURLWithPath: dir))
        }
        directories.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Weights"))
        directories.append(cacheDirectory)
        return directories
    }

    /// `$YOLO_CACHE_DIR`, else `$XDG_CACHE_HOME/yolo-swift`, else `~/.cache/yolo-swift`.
    public static var cacheDirectory: URL {
        let env = ProcessInfo.processInfo.environment
        if let dir = env["YOLO_CACHE_DIR"], !dir.isEmpty { return URL(fileURLWithPath: dir) }
        let base = env["XDG_CACHE_HOME"].flatMap { $0.isEmpty ? nil : URL(fileURLWithPath: $0) }
            ?? FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache")
        return base.appendingPathComponent("yolo-swift")
    }

    /// The weight file for a model name ("yolo26n") or a path ("models/best.safetensors").
    public static func url(for nameOrPath: String) throws -> URL {
        let fm = FileManager.default
        let looksLikePath = nameOrPath.contains("/") || nameOrPath.hasSuffix(".safetensors")
        if looksLikePath {
            guard fm.fileExists(atPath: nameOrPath) else {
                throw YOLOError.modelNotFound(name: nameOrPath, searched: [nameOrPath])
            }
            return URL(fileURLWithPath: nameOrPath)
        }
        let candidates = searchDirectories.map { $0.appendingPathComponent(nameOrPath + ".safetensors") }
        guard let found = candidates.first(where: { fm.fileExists(atPath: $0.path) }) else {
            throw YOLOError.modelNotFound(name: nameOrPath, searched: candidates.map(\.path))
        }
        return found
    }
}

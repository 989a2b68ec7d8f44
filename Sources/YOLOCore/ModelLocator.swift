import Foundation

/// Finds weight files: an http(s) URL through the download cache, a path as given, else
/// `<name>.safetensors` or `<name>.pt` (an Ultralytics checkpoint) in `YOLO_WEIGHTS_DIR`, then
/// `Weights/` under the current directory, then the download cache (where a download of
/// `…/<name>.safetensors` also counts).
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

    /// `nameOrPath` as a URL when it is an http(s) one.
    static func httpURL(_ nameOrPath: String) -> URL? {
        URL(string: nameOrPath).flatMap { ["http", "https"].contains($0.scheme?.lowercased()) ? $0 : nil }
    }

    /// The weight file for a model name ("yolo26n"), a path ("models/best.pt") or an
    /// http(s) URL ("https://host/best.safetensors"). A URL not yet in the cache is downloaded,
    /// blocking the calling thread, with the timeout of `$YOLO_DOWNLOAD_TIMEOUT` (see `YOLO(url:)`).
    public static func url(for nameOrPath: String) throws -> URL {
        if let url = httpURL(nameOrPath) { return try ModelCache.fetch(url, sha256: nil, timeout: nil) }
        let fm = FileManager.default
        let looksLikePath = nameOrPath.contains("/") || nameOrPath.hasSuffix(".safetensors") || nameOrPath.hasSuffix(".pt")
        if looksLikePath {
            guard fm.fileExists(atPath: nameOrPath) else {
                throw YOLOError.modelNotFound(name: nameOrPath, searched: [nameOrPath])
            }
            return URL(fileURLWithPath: nameOrPath)
        }
        let candidates = searchDirectories.flatMap { directory in
            [".safetensors", ".pt"].map { directory.appendingPathComponent(nameOrPath + $0) }
        }
        if let found = candidates.first(where: { fm.fileExists(atPath: $0.path) }) { return found }
        // Downloads are cached as `<16 hex digits of the URL's hash>-<name>.safetensors`.
        let suffix = "-\(nameOrPath).safetensors"
        let downloads = ((try? fm.contentsOfDirectory(atPath: cacheDirectory.path)) ?? [])
            .filter { $0.hasSuffix(suffix) && $0.count == 16 + suffix.count && $0.prefix(16).allSatisfy(\.isHexDigit) }
            .sorted().map { cacheDirectory.appendingPathComponent($0) }
        guard downloads.count <= 1 else {
            throw YOLOError.ambiguousModel(name: nameOrPath, candidates: downloads.map(\.path))
        }
        guard let download = downloads.first else {
            throw YOLOError.modelNotFound(
                name: nameOrPath, searched: candidates.map(\.path) + [cacheDirectory.appendingPathComponent("*" + suffix).path])
        }
        return download
    }
}

import Foundation

/// Finds weight files: an http(s) URL through the download cache, a path as given, else
/// `<name>.safetensors` or `<name>.pt` (an Ultralytics checkpoint) in `YOLO_WEIGHTS_DIR`, then
/// `Weights/` under the current directory, then the download cache, and last, for an official
/// Ultralytics model name, its release asset from the cache, downloaded there first if need be.
/// Other downloads are found by their URL only, so `…/yolo26n.pt` from anywhere never stands in
/// for the official yolo26n.
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

    /// Where official models are downloaded from: `$YOLO_ASSETS_URL` (mirrors, air-gapped
    /// installs, tests), else the Ultralytics release `attempt_download_asset` uses.
    public static var assetsURL: URL {
        let mirror = ProcessInfo.processInfo.environment["YOLO_ASSETS_URL"].flatMap { $0.isEmpty ? nil : URL(string: $0) }
        return mirror ?? URL(string: "https://github.com/ultralytics/assets/releases/download/v8.4.0")!
    }

    /// Whether Ultralytics publishes `name` as a release asset (`GITHUB_ASSETS_NAMES` of 8.4.190)
    /// in a family and task yolo-swift runs: YOLO26, YOLO11 and YOLOv8 in every task (and v8's
    /// Open Images detector), YOLO12, v10, v9 (and its two segmenters), v5u (P5 and P6) and v3u.
    public static func isOfficial(_ name: String) -> Bool {
        name.wholeMatch(of: /yolo(26|11|v8)[nsmlx](-seg|-pose|-obb|-cls)?|yolov8[nsmlx]-oiv7|yolo12[nsmlx]|yolov10[nsmblx]/) != nil
            || name.wholeMatch(of: /yolov9[tsmce]|yolov9[ce]-seg|yolov5[nsmlx]6?u|yolov3(-spp|-tiny)?u/) != nil
    }

    /// `nameOrPath` as a URL when it is an http(s) one.
    static func httpURL(_ nameOrPath: String) -> URL? {
        URL(string: nameOrPath).flatMap { ["http", "https"].contains($0.scheme?.lowercased()) ? $0 : nil }
    }

    /// The weight file for a model name ("yolo26n", or "yolo26n.pt" as Ultralytics names it), a
    /// path ("models/best.pt") or an http(s) URL ("https://host/best.safetensors"). A URL not yet
    /// in the cache, or an official model found nowhere, is downloaded, blocking the calling
    /// thread, with the timeout of `$YOLO_DOWNLOAD_TIMEOUT` (see `YOLO(url:)`); `YOLO_OFFLINE=1`
    /// forbids downloading official models, and so does `downloading: false`.
    public static func url(for nameOrPath: String, downloading: Bool = true) throws -> URL {
        if let url = httpURL(nameOrPath) { return try ModelCache.fetch(url, sha256: nil, timeout: nil) }
        let fm = FileManager.default
        // "yolo26n.pt" with no such file is the model's name, as in Ultralytics.
        let checkpointName = !nameOrPath.contains("/") && nameOrPath.hasSuffix(".pt") && !fm.fileExists(atPath: nameOrPath)
        let name = checkpointName ? String(nameOrPath.dropLast(3)) : nameOrPath
        let looksLikePath = !checkpointName
            && (nameOrPath.contains("/") || nameOrPath.hasSuffix(".safetensors") || nameOrPath.hasSuffix(".pt"))
        if looksLikePath {
            guard fm.fileExists(atPath: nameOrPath) else {
                throw YOLOError.modelNotFound(name: nameOrPath, searched: [nameOrPath])
            }
            return URL(fileURLWithPath: nameOrPath)
        }
        let candidates = searchDirectories.flatMap { directory in
            [".safetensors", ".pt"].map { directory.appendingPathComponent(name + $0) }
        }
        if let found = candidates.first(where: { fm.fileExists(atPath: $0.path) }) { return found }
        guard isOfficial(name) else { throw YOLOError.modelNotFound(name: name, searched: candidates.map(\.path)) }
        let asset = assetsURL.appendingPathComponent(name + ".pt")
        let cached = try ModelCache.file(for: asset)
        if fm.fileExists(atPath: cached.path) { return cached }
        guard downloading else { throw YOLOError.modelNotFound(name: name, searched: candidates.map(\.path) + [cached.path]) }
        guard ProcessInfo.processInfo.environment["YOLO_OFFLINE"] != "1" else {
            throw YOLOError.offline(name: name, url: asset.absoluteString, directories: searchDirectories.dropLast().map(\.path))
        }
        return try ModelCache.fetch(asset, sha256: nil, timeout: nil)
    }
}

import Foundation

/// Where weight files are found and cached, and how they are downloaded: a value, so two stores
/// coexist in one process (a server's and a test's). `fromEnvironment()` reads the `YOLO_*`
/// variables; the CLI does once at start, and `YOLO(_:)` when given no store.
///
/// A model name ("yolo26n") is `<name>.safetensors` or `<name>.pt` (an Ultralytics checkpoint) in
/// `searchDirectories`, then in the cache, and last, for an official Ultralytics model name, its
/// release asset from `assetsURL`, downloaded into the cache. Other downloads are found by their URL
/// only, so `…/yolo26n.pt` from anywhere never stands in for the official yolo26n.
///
/// ```swift
/// var store = try ModelStore.fromEnvironment()
/// store.offline = true
/// let model = try await YOLO("yolo26n", store: store)
/// ```
public struct ModelStore: Sendable, Equatable {
    /// Directories searched for a model name before the cache, in order.
    public var searchDirectories: [URL]
    /// Where downloads are kept, under a name derived from their URL.
    public var cacheDirectory: URL
    /// Where official models are downloaded from (mirrors, air-gapped installs, tests).
    public var assetsURL: URL
    /// Whether official models may not be downloaded (URLs given explicitly still are).
    public var offline: Bool
    /// How long connecting may take, how long a transfer may go without receiving a byte, and the
    /// grace before it must average 10 kB/s; in (0 s, 1 day].
    public var downloadTimeout: Duration
    /// The most bytes a download may have.
    public var maxDownloadBytes: Int

    /// The release `attempt_download_asset` of Ultralytics 8.4.190 uses.
    public static let ultralyticsAssets = URL(string: "https://github.com/ultralytics/assets/releases/download/v8.4.0")!

    public init(searchDirectories: [URL] = [URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("Weights")],
                cacheDirectory: URL = FileManager.default.homeDirectoryForCurrentUser.appendingPathComponent(".cache/yolo-swift"),
                assetsURL: URL = ModelStore.ultralyticsAssets, offline: Bool = false,
                downloadTimeout: Duration = .seconds(30), maxDownloadBytes: Int = 4 << 30) {
        self.searchDirectories = searchDirectories
        self.cacheDirectory = cacheDirectory
        self.assetsURL = assetsURL
        self.offline = offline
        self.downloadTimeout = downloadTimeout
        self.maxDownloadBytes = maxDownloadBytes
    }

    /// The store the environment describes: `YOLO_WEIGHTS_DIR` searched before `./Weights`;
    /// the cache in `YOLO_CACHE_DIR`, else `$XDG_CACHE_HOME/yolo-swift`, else
    /// `~/.cache/yolo-swift`; `YOLO_ASSETS_URL`; `YOLO_OFFLINE=1`; `YOLO_DOWNLOAD_TIMEOUT`
    /// (seconds) and `YOLO_MAX_DOWNLOAD` (bytes). A value that cannot be used is an error naming it.
    public static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ModelStore {
        func value<T>(_ name: String, _ requirement: String, _ parse: (String) -> T?) throws -> T? {
            guard let text = environment[name], !text.isEmpty else { return nil }
            guard let value = parse(text) else {
                throw YOLOError.invalidConfiguration(field: name, value: text, reason: "must be \(requirement)")
            }
            return value
        }
        var store = ModelStore()
        if let directory = environment["YOLO_WEIGHTS_DIR"], !directory.isEmpty {
            store.searchDirectories.insert(URL(fileURLWithPath: directory), at: 0)
        }
        if let directory = environment["YOLO_CACHE_DIR"], !directory.isEmpty {
            store.cacheDirectory = URL(fileURLWithPath: directory)
        } else if let base = environment["XDG_CACHE_HOME"], !base.isEmpty {
            store.cacheDirectory = URL(fileURLWithPath: base).appendingPathComponent("yolo-swift")
        }
        store.assetsURL = try value("YOLO_ASSETS_URL", "an http(s) URL", httpURL) ?? store.assetsURL
        store.offline = environment["YOLO_OFFLINE"] == "1"
        store.downloadTimeout = try value("YOLO_DOWNLOAD_TIMEOUT", "a number of seconds in (0, \(ModelCache.maxTimeout)]") {
            Double($0).flatMap { $0 > 0 && $0 <= ModelCache.maxTimeout ? .milliseconds(Int64(($0 * 1000).rounded(.up))) : nil }
        } ?? store.downloadTimeout
        store.maxDownloadBytes = try value("YOLO_MAX_DOWNLOAD", "a whole number of bytes greater than 0") {
            Int($0).flatMap { $0 > 0 ? $0 : nil }
        } ?? store.maxDownloadBytes
        return store
    }

    /// Whether Ultralytics publishes `name` as a release asset (`GITHUB_ASSETS_NAMES` of 8.4.190)
    /// in a family and task yolo-swift runs: YOLO26, YOLO11 and YOLOv8 in every task (and v8's
    /// Open Images detector), YOLO12, v10, v9 (and its two segmenters), v5u (P5 and P6) and v3u.
    public static func isOfficial(_ name: String) -> Bool { ModelInfo.officialNames.contains(name) }

    /// `nameOrPath` as a URL when it is an http(s) one.
    static func httpURL(_ nameOrPath: String) -> URL? {
        URL(string: nameOrPath).flatMap { ["http", "https"].contains($0.scheme?.lowercased()) ? $0 : nil }
    }

    /// The weight file for a model name ("yolo26n", or "yolo26n.pt" as Ultralytics names it), a
    /// path ("models/best.pt") or an http(s) URL ("https://host/best.safetensors"). A URL not yet
    /// in the cache, or an official model found nowhere, is downloaded, blocking the calling
    /// thread (see `fetch`); `offline` forbids downloading official models, and so does
    /// `downloading: false`.
    public func url(for nameOrPath: String, downloading: Bool = true) throws -> URL {
        if let url = Self.httpURL(nameOrPath) { return try fetch(url) }
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
        let candidates = (searchDirectories + [cacheDirectory]).flatMap { directory in
            [".safetensors", ".pt"].map { directory.appendingPathComponent(name + $0) }
        }
        if let found = candidates.first(where: { fm.fileExists(atPath: $0.path) }) { return found }
        guard Self.isOfficial(name) else { throw YOLOError.modelNotFound(name: name, searched: candidates.map(\.path)) }
        let asset = assetsURL.appendingPathComponent(name + ".pt")
        let cached = try cachedFile(for: asset)
        if fm.fileExists(atPath: cached.path) { return cached }
        guard downloading else { throw YOLOError.modelNotFound(name: name, searched: candidates.map(\.path) + [cached.path]) }
        guard !offline else {
            throw YOLOError.offline(name: name, url: asset.absoluteString, directories: searchDirectories.map(\.path))
        }
        return try fetch(asset)
    }

    /// The cached file for `url`, downloaded first if it is not in the cache, blocking the calling
    /// thread. With `sha256`, the file must have that digest (checked after download and on every
    /// cache hit; a mismatching cached file is downloaded again). `timeout` replaces
    /// `downloadTimeout` for this download. A file URL is returned as it is.
    public func fetch(_ url: URL, sha256: String? = nil, timeout: Duration? = nil) throws -> URL {
        if url.isFileURL { return url }
        return try ModelCache.fetch(url, into: try cachedFile(for: url), sha256: sha256,
                                    timeout: try ModelCache.seconds(of: timeout ?? downloadTimeout, field: timeout == nil ? "downloadTimeout" : "timeout"),
                                    limit: maxDownloadBytes)
    }

    /// Where the download of `url` is cached.
    func cachedFile(for url: URL) throws -> URL {
        cacheDirectory.appendingPathComponent(try ModelCache.fileName(for: url))
    }
}

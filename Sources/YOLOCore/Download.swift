import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

extension YOLO {
    /// Loads a model from a URL: downloaded once into `ModelLocator.cacheDirectory`, then read
    /// from there. With `sha256`, the file must have that digest (checked after download and
    /// on every cache hit; a mismatching cached file is downloaded again).
    public convenience init(url: URL, sha256: String? = nil,
                            configuration: YOLOConfiguration = YOLOConfiguration()) async throws {
        try self.init(contentsOf: try await ModelCache.fetch(url, sha256: sha256), configuration: configuration)
    }
}

/// The download cache. A download goes to a temporary file in the cache directory and is
/// renamed into place only once complete and verified, so an interrupted or corrupt download
/// never leaves a file under the model's name.
enum ModelCache {
    static func fetch(_ url: URL, sha256 expected: String?) async throws -> URL {
        if url.isFileURL { return url }
        let fm = FileManager.default
        let name = url.lastPathComponent
        guard name.hasSuffix(".safetensors") else {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: "the URL does not name a .safetensors file")
        }
        let directory = ModelLocator.cacheDirectory
        let destination = directory.appendingPathComponent(name)
        if fm.fileExists(atPath: destination.path),
           try expected.map({ try digest(of: destination) == $0.lowercased() }) ?? true {
            return destination
        }
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: "cannot create cache directory \(directory.path): \(error.localizedDescription)")
        }
        let data: Data, response: URLResponse
        do {
            (data, response) = try await URLSession.shared.data(from: url)
        } catch {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: error.localizedDescription)
        }
        if let http = response as? HTTPURLResponse, http.statusCode != 200 {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: "HTTP status \(http.statusCode)")
        }
        if let expected, SHA256.hexDigest(data) != expected.lowercased() {
            throw YOLOError.downloadFailed(url: url.absoluteString,
                                           reason: "SHA-256 \(SHA256.hexDigest(data)) does not match the expected \(expected)")
        }
        let partial = directory.appendingPathComponent(".\(name).\(UUID().uuidString).partial")
        do {
            try data.write(to: partial)
            // rename(2) replaces the destination atomically.
            guard rename(partial.path, destination.path) == 0 else {
                throw YOLOError.downloadFailed(url: url.absoluteString, reason: "cannot move the download into \(destination.path)")
            }
        } catch {
            try? fm.removeItem(at: partial)
            throw error as? YOLOError ?? YOLOError.downloadFailed(url: url.absoluteString, reason: error.localizedDescription)
        }
        return destination
    }

    static func digest(of file: URL) throws -> String {
        SHA256.hexDigest(try Data(contentsOf: file, options: .alwaysMapped))
    }
}

import Dispatch
import Foundation

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
        let partial = directory.appendingPathComponent(".\(name).\(UUID().uuidString).partial")
        do {
            // libcurl blocks: on a Dispatch thread, not one of the concurrency pool's.
            try await withCheckedThrowingContinuation { (done: CheckedContinuation<Void, Error>) in
                DispatchQueue.global().async {
                    done.resume(with: Result { try Curl.download(url.absoluteString, to: partial.path) })
                }
            }
            if let expected {
                let actual = try digest(of: partial)
                guard actual == expected.lowercased() else {
                    throw YOLOError.downloadFailed(url: url.absoluteString,
                                                   reason: "SHA-256 \(actual) does not match the expected \(expected)")
                }
            }
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

/// libcurl, loaded at run time by the first download: linked through FoundationNetworking's
/// URLSession, it and the thirty TLS, HTTP and Kerberos libraries it needs were mapped into every
/// process that used YOLOCore, downloading or not (6 MB of a yolo26n benchmark's resident memory).
/// libcurl 4 is a dependency of Swift's Linux toolchain, so it is there wherever Swift runs.
private enum Curl {
    private typealias Handle = OpaquePointer
    // curl_easy_setopt and curl_easy_getinfo are variadic: called here with one argument of the
    // type the option takes, as the x86-64 and AArch64 calling conventions allow.
    private struct Library: Sendable {
        let initialize: @convention(c) () -> Handle?
        let setString: @convention(c) (Handle?, Int32, UnsafePointer<CChar>?) -> Int32
        let setPointer: @convention(c) (Handle?, Int32, UnsafeMutableRawPointer?) -> Int32
        let setLong: @convention(c) (Handle?, Int32, Int) -> Int32
        let perform: @convention(c) (Handle?) -> Int32
        let getLong: @convention(c) (Handle?, Int32, UnsafeMutablePointer<Int>) -> Int32
        let message: @convention(c) (Int32) -> UnsafePointer<CChar>?
        let cleanup: @convention(c) (Handle?) -> Void
    }

    /// Why libcurl is not usable.
    private struct Unavailable: Error {
        let reason: String
    }

    private static let library: Result<Library, Unavailable> = {
        let names = ["libcurl.so.4", "libcurl-gnutls.so.4", "libcurl.so"]
        guard let handle = names.lazy.compactMap({ dlopen($0, RTLD_NOW) }).first else {
            return .failure(Unavailable(reason: "libcurl could not be loaded (tried \(names.joined(separator: ", "))); "
                + "install it with `apt-get install libcurl4`"))
        }
        func symbol<T>(_ name: String, as _: T.Type) -> T? { dlsym(handle, name).map { unsafeBitCast($0, to: T.self) } }
        // CURL_GLOBAL_DEFAULT, once, before any handle (not thread-safe in older versions).
        guard let global = symbol("curl_global_init", as: (@convention(c) (Int) -> Int32).self), global(3) == 0,
              let initialize = symbol("curl_easy_init", as: (@convention(c) () -> Handle?).self),
              let setString = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, UnsafePointer<CChar>?) -> Int32).self),
              let setPointer = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, UnsafeMutableRawPointer?) -> Int32).self),
              let setLong = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, Int) -> Int32).self),
              let perform = symbol("curl_easy_perform", as: (@convention(c) (Handle?) -> Int32).self),
              let getLong = symbol("curl_easy_getinfo", as: (@convention(c) (Handle?, Int32, UnsafeMutablePointer<Int>) -> Int32).self),
              let message = symbol("curl_easy_strerror", as: (@convention(c) (Int32) -> UnsafePointer<CChar>?).self),
              let cleanup = symbol("curl_easy_cleanup", as: (@convention(c) (Handle?) -> Void).self)
        else {
            return .failure(Unavailable(reason: "the loaded libcurl lacks curl_global_init or the curl_easy_* functions"))
        }
        return .success(Library(initialize: initialize, setString: setString, setPointer: setPointer, setLong: setLong,
                                perform: perform, getLong: getLong, message: message, cleanup: cleanup))
    }()

    /// Writes the body of a 200 response to `url` (redirects followed) into the file at `path`.
    static func download(_ url: String, to path: String) throws {
        let curl: Library
        switch library {
        case .success(let loaded): curl = loaded
        case .failure(let unavailable): throw YOLOError.downloadFailed(url: url, reason: unavailable.reason)
        }
        guard let file = fopen(path, "wb") else {
            throw YOLOError.downloadFailed(url: url, reason: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { fclose(file) }
        guard let handle = curl.initialize() else { throw YOLOError.downloadFailed(url: url, reason: "curl_easy_init failed") }
        defer { curl.cleanup(handle) }
        // CURLOPT_URL, CURLOPT_WRITEDATA (a FILE *, which libcurl's default writer fwrites to),
        // CURLOPT_FOLLOWLOCATION, CURLOPT_NOSIGNAL (no SIGALRM for timeouts in a threaded process).
        _ = curl.setString(handle, 10002, url)
        _ = curl.setPointer(handle, 10001, UnsafeMutableRawPointer(file))
        _ = curl.setLong(handle, 52, 1)
        _ = curl.setLong(handle, 99, 1)
        let code = curl.perform(handle)
        guard code == 0 else {
            throw YOLOError.downloadFailed(url: url, reason: curl.message(code).map { String(cString: $0) } ?? "libcurl error \(code)")
        }
        // CURLINFO_RESPONSE_CODE.
        var status = 0
        _ = curl.getLong(handle, 0x200002, &status)
        guard status == 200 else { throw YOLOError.downloadFailed(url: url, reason: "HTTP status \(status)") }
        guard fflush(file) == 0 else {
            throw YOLOError.downloadFailed(url: url, reason: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }
}

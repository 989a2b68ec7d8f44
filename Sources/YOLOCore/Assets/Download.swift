import Crypto
import Dispatch
import Foundation
import YOLONet

extension YOLO {
    /// Loads a model from a URL: downloaded once into the store's cache, then read from there (see
    /// `ModelStore.fetch` for `sha256` and `timeout`); `store` nil reads `ModelStore.fromEnvironment()`.
    ///
    /// A download fails when connecting takes longer than the timeout, the transfer goes that long
    /// without receiving a byte (counted in whole seconds), or, after that grace, it averages under
    /// 10 kB/s (so it must end within timeout + size / 10 kB/s); when the body has more than
    /// `maxDownloadBytes`; or after 10 redirects. `task`: see `init(contentsOf:task:configuration:precision:)`.
    public convenience init(url: URL, task: YOLOTask? = nil, sha256: String? = nil, timeout: Duration? = nil, store: ModelStore? = nil,
                            configuration: YOLOConfiguration = YOLOConfiguration(),
                            precision: YOLOPrecision = .fp32) async throws {
        let store = try store ?? .fromEnvironment()
        // libcurl blocks: on a Dispatch thread, not one of the concurrency pool's.
        let file = try await withCheckedThrowingContinuation { (done: CheckedContinuation<URL, Error>) in
            DispatchQueue.global().async {
                done.resume(with: Result { try store.fetch(url, sha256: sha256, timeout: timeout) })
            }
        }
        try self.init(contentsOf: file, task: task, configuration: configuration, precision: precision)
    }
}

/// The download cache. A download goes to a temporary file in the cache directory and is
/// renamed into place only once complete and verified, so an interrupted or corrupt download
/// never leaves a file under the model's name.
enum ModelCache {
    /// A day: longer is a mistake, and libcurl takes the timeouts as integers.
    static let maxTimeout = 86_400.0
    /// The slowest average a download may keep after its first `timeout` seconds, in bytes/s:
    /// a server dripping bytes fails the download instead of holding its thread forever.
    static let minimumRate = 10_000.0
    /// Characters kept of a URL's file name (its end): with the hash prefix and the `.partial`
    /// file's decorations, well under the 255-byte limit of file names.
    static let maxNameLength = 128
    /// A `.partial` file this old belongs to a download that was killed, not one in progress.
    static let stalePartialAge: TimeInterval = 86_400

    /// Downloads `url` into `destination` unless it is there already (with the digest `expected`,
    /// when given); blocks the calling thread. `timeout` in seconds, `limit` in bytes.
    static func fetch(_ url: URL, into destination: URL, sha256 expected: String?, timeout seconds: Double, limit: Int) throws -> URL {
        let fm = FileManager.default
        let directory = destination.deletingLastPathComponent()
        if fm.fileExists(atPath: destination.path),
           try expected.map({ try digest(of: destination) == $0.lowercased() }) ?? true {
            return destination
        }
        guard limit > 0 else {
            throw YOLOError.invalidConfiguration(field: "maxDownloadBytes", value: "\(limit)", reason: "must be greater than 0")
        }
        do {
            try fm.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: "cannot create cache directory \(directory.path): \(error.localizedDescription)")
        }
        sweepStalePartials(in: directory)
        let partial = directory.appendingPathComponent(".\(destination.lastPathComponent).\(UUID().uuidString).partial")
        do {
            try Curl.download(url.absoluteString, to: partial.path, timeout: seconds, limit: limit)
            if let expected {
                let actual = try digest(of: partial)
                guard actual == expected.lowercased() else {
                    throw YOLOError.downloadFailed(url: url.absoluteString,
                                                   reason: "SHA-256 \(actual) does not match the expected \(expected)")
                }
            }
            try validate(partial, from: url)
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

    /// `<first 16 hex digits of SHA-256(url)>-<last path component>`: keyed by the whole URL, so
    /// two URLs ending in the same name do not collide; every character of the name outside
    /// letters, digits, `.`, `-` and `_` becomes `_`, so a decoded `%2F` cannot leave the directory,
    /// and only its last `maxNameLength` characters are kept.
    static func fileName(for url: URL) throws -> String {
        let name = url.lastPathComponent
        guard name.hasSuffix(".safetensors") || name.hasSuffix(".pt") else {
            throw YOLOError.downloadFailed(url: url.absoluteString, reason: "the URL does not name a .safetensors or .pt file")
        }
        let safe = String(name.suffix(maxNameLength).map {
            $0.isASCII && ($0.isLetter || $0.isNumber || "._-".contains($0)) ? $0 : "_"
        })
        return Data(url.absoluteString.utf8).sha256Hex.prefix(16) + "-" + safe
    }

    /// Whether a download is a complete `yolo-safetensors/1` file (or a checkpoint read as one), so that an HTML error page
    /// or a cut-off body served with status 200 never enters the cache.
    static func validate(_ file: URL, from url: URL) throws {
        func fail(_ reason: String) -> YOLOError { .downloadFailed(url: url.absoluteString, reason: reason) }
        let body = try Data(contentsOf: file, options: .alwaysMapped)
        let parsed: SafeTensorsFile
        do {
            parsed = try SafeTensorsFile(data: body, source: "the body")
        } catch {
            if body.first(where: { !Character(UnicodeScalar($0)).isWhitespace }) == UInt8(ascii: "<") {
                throw fail("the body is \(body.count) bytes of HTML, not a safetensors file")
            }
            throw fail("the body (\(body.count) bytes) is not a safetensors file: "
                + ((error as? LocalizedError)?.errorDescription ?? "\(error)"))
        }
        guard let format = parsed.metadata["format"] else {
            throw fail("the body is not a yolo-safetensors/1 file: its metadata has no 'format'")
        }
        guard format == "yolo-safetensors/1" else {
            throw fail("the body is not a yolo-safetensors/1 file: its metadata 'format' is '\(format)'")
        }
    }

    /// Removes `.partial` files left by downloads that were killed a day or more ago.
    static func sweepStalePartials(in directory: URL) {
        let fm = FileManager.default
        let files = (try? fm.contentsOfDirectory(at: directory, includingPropertiesForKeys: [.contentModificationDateKey])) ?? []
        for file in files where file.pathExtension == "partial" {
            let modified = try? file.resourceValues(forKeys: [.contentModificationDateKey]).contentModificationDate
            if let modified, -modified.timeIntervalSinceNow > stalePartialAge {
                try? fm.removeItem(at: file)
            }
        }
    }

    /// `timeout` in seconds, refused outside (0, `maxTimeout`] as the configuration `field`.
    static func seconds(of timeout: Duration, field: String) throws -> Double {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) * 1e-18
        guard seconds > 0, seconds <= maxTimeout else {
            throw YOLOError.invalidConfiguration(field: field, value: "\(timeout)", reason: "must be in (0, \(maxTimeout)] seconds")
        }
        return seconds
    }

    static func digest(of file: URL) throws -> String {
        try Data(contentsOf: file, options: .alwaysMapped).sha256Hex
    }
}

/// libcurl, loaded at run time by the first download: linked (as FoundationNetworking's URLSession
/// links it), it and the thirty TLS, HTTP and Kerberos libraries it needs would be mapped into every
/// process using YOLOCore, downloading or not (docs/PERFORMANCE.md, peak memory).
/// libcurl 4 is a dependency of Swift's Linux toolchain, so it is there wherever Swift runs.
enum Curl {
    private typealias Handle = OpaquePointer
    /// CURLOPT_WRITEFUNCTION's type: (bytes, 1, count, CURLOPT_WRITEDATA) -> bytes taken, fewer aborting.
    private typealias Writer = @convention(c) (UnsafeMutableRawPointer?, Int, Int, UnsafeMutableRawPointer?) -> Int
    // curl_easy_setopt and curl_easy_getinfo are variadic: called here with one argument of the
    // type the option takes, as the x86-64 and AArch64 calling conventions allow.
    private struct Library: Sendable {
        let initialize: @convention(c) () -> Handle?
        let setString: @convention(c) (Handle?, Int32, UnsafePointer<CChar>?) -> Int32
        let setPointer: @convention(c) (Handle?, Int32, UnsafeMutableRawPointer?) -> Int32
        let setLong: @convention(c) (Handle?, Int32, Int) -> Int32
        let setWriter: @convention(c) (Handle?, Int32, Writer?) -> Int32
        let perform: @convention(c) (Handle?) -> Int32
        let getLong: @convention(c) (Handle?, Int32, UnsafeMutablePointer<Int>) -> Int32
        let message: @convention(c) (Int32) -> UnsafePointer<CChar>?
        let cleanup: @convention(c) (Handle?) -> Void
    }

    /// The options every request here sets: CURLOPT_URL, CURLOPT_FOLLOWLOCATION, CURLOPT_MAXREDIRS
    /// (libcurl's default is no limit), CURLOPT_PROTOCOLS and CURLOPT_REDIR_PROTOCOLS (HTTP and
    /// HTTPS; the bitmask forms, deprecated in libcurl 7.85 for string forms that older versions
    /// lack), CURLOPT_NOSIGNAL (no SIGALRM for timeouts in a threaded process).
    private static func request(_ curl: Library, _ handle: Handle, _ url: String) {
        _ = curl.setString(handle, 10002, url)
        _ = curl.setLong(handle, 52, 1)
        _ = curl.setLong(handle, 68, 10)
        _ = curl.setLong(handle, 181, 3)
        _ = curl.setLong(handle, 182, 3)
        _ = curl.setLong(handle, 99, 1)
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
              let setWriter = symbol("curl_easy_setopt", as: (@convention(c) (Handle?, Int32, Writer?) -> Int32).self),
              let perform = symbol("curl_easy_perform", as: (@convention(c) (Handle?) -> Int32).self),
              let getLong = symbol("curl_easy_getinfo", as: (@convention(c) (Handle?, Int32, UnsafeMutablePointer<Int>) -> Int32).self),
              let message = symbol("curl_easy_strerror", as: (@convention(c) (Int32) -> UnsafePointer<CChar>?).self),
              let cleanup = symbol("curl_easy_cleanup", as: (@convention(c) (Handle?) -> Void).self)
        else {
            return .failure(Unavailable(reason: "the loaded libcurl lacks curl_global_init or the curl_easy_* functions"))
        }
        return .success(Library(initialize: initialize, setString: setString, setPointer: setPointer, setLong: setLong,
                                setWriter: setWriter, perform: perform, getLong: getLong, message: message, cleanup: cleanup))
    }()

    /// Where the writer puts the body, checking the size limit and the average rate as bytes arrive.
    private struct Sink {
        let file: UnsafeMutablePointer<FILE>
        let path: String
        let limit: Int
        let timeout: Double
        let start = ContinuousClock.now
        var received = 0
        /// Why the writer stopped the transfer.
        var failure: String?

        mutating func write(_ bytes: UnsafeMutableRawPointer?, _ count: Int) -> Int {
            received += count
            let elapsed = start.duration(to: .now) / .seconds(1)
            if received > limit {
                failure = "the body exceeds the \(limit)-byte limit (ModelStore.maxDownloadBytes, YOLO_MAX_DOWNLOAD)"
            } else if elapsed > timeout + Double(received) / ModelCache.minimumRate {
                failure = "timed out: \(received) bytes in \(String(format: "%.1f", elapsed)) s, under the "
                    + "\(Int(ModelCache.minimumRate)) bytes/s on average required after the first \(timeout) s "
                    + "(ModelStore.downloadTimeout, YOLO_DOWNLOAD_TIMEOUT or the timeout parameter)"
            } else if fwrite(bytes, 1, count, file) != count {
                failure = "cannot write \(path): \(String(cString: strerror(errno)))"
            }
            return failure == nil ? count : 0
        }
    }

    /// Writes the body of a 200 response to `url` (at most 10 redirects followed, http and https
    /// only) into the file at `path`; fails when connecting takes longer than `timeout` seconds,
    /// no byte arrives for as long, the transfer averages under `ModelCache.minimumRate` after
    /// as long, or the body has more than `limit` bytes.
    static func download(_ url: String, to path: String, timeout: Double, limit: Int) throws {
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
        var sink = Sink(file: file, path: path, limit: limit, timeout: timeout)
        // CURL_ERROR_SIZE: libcurl's message for a failure, more specific than curl_easy_strerror.
        var detail = [CChar](repeating: 0, count: 256)
        let code = detail.withUnsafeMutableBytes { detail in
            withUnsafeMutablePointer(to: &sink) { sink in
                // CURLOPT_WRITEFUNCTION and CURLOPT_WRITEDATA (the sink), CURLOPT_MAXFILESIZE_LARGE
                // (a Content-Length over it fails before the body), CURLOPT_ERRORBUFFER,
                // CURLOPT_CONNECTTIMEOUT_MS, and CURLOPT_LOW_SPEED_LIMIT and CURLOPT_LOW_SPEED_TIME:
                // below 1 byte/s for that many whole seconds is a stall (slow averages are the sink's);
                // CURLOPT_NOPROGRESS off, libcurl's progress meter on stderr, when that is a terminal.
                request(curl, handle, url)
                _ = curl.setWriter(handle, 20011) { bytes, size, count, sink in
                    sink?.assumingMemoryBound(to: Sink.self).pointee.write(bytes, size * count) ?? 0
                }
                _ = curl.setPointer(handle, 10001, UnsafeMutableRawPointer(sink))
                _ = curl.setLong(handle, 30117, limit)
                _ = curl.setPointer(handle, 10010, detail.baseAddress)
                _ = curl.setLong(handle, 156, Int((timeout * 1000).rounded(.up)))
                _ = curl.setLong(handle, 19, 1)
                _ = curl.setLong(handle, 20, Int(timeout.rounded(.up)))
                _ = curl.setLong(handle, 43, isatty(2) == 1 ? 0 : 1)
                return curl.perform(handle)
            }
        }
        if let failure = sink.failure { throw YOLOError.downloadFailed(url: url, reason: failure) }
        guard code == 0 else {
            let message = detail[0] != 0 ? String(decoding: detail.prefix { $0 != 0 }.map(UInt8.init(bitPattern:)), as: UTF8.self)
                : curl.message(code).map { String(cString: $0) } ?? "libcurl error \(code)"
            switch code {
            case 28: // CURLE_OPERATION_TIMEDOUT
                throw YOLOError.downloadFailed(url: url, reason: "timed out after \(timeout) s (the connect and stall timeout; "
                    + "ModelStore.downloadTimeout, YOLO_DOWNLOAD_TIMEOUT or the timeout parameter): \(message)")
            case 63: // CURLE_FILESIZE_EXCEEDED, from the Content-Length (libcurl does not keep its value then).
                throw YOLOError.downloadFailed(url: url, reason: "the body's Content-Length exceeds the \(limit)-byte limit "
                    + "(ModelStore.maxDownloadBytes, YOLO_MAX_DOWNLOAD)")
            default:
                throw YOLOError.downloadFailed(url: url, reason: message)
            }
        }
        // CURLINFO_RESPONSE_CODE.
        var status = 0
        _ = curl.getLong(handle, 0x200002, &status)
        guard status == 200 else { throw YOLOError.downloadFailed(url: url, reason: "HTTP status \(status)") }
        guard fflush(file) == 0 else {
            throw YOLOError.downloadFailed(url: url, reason: "cannot write \(path): \(String(cString: strerror(errno)))")
        }
    }

    /// The headers of a GET's final response (after redirects), gathered line by line: the
    /// transfer is abandoned at their end, before any body, so an endless stream costs nothing.
    private struct Headers {
        var contentType: String?
        var isRedirect = false
        var ended = false

        mutating func read(_ bytes: UnsafeMutableRawPointer?, _ count: Int) -> Int {
            guard let bytes else { return 0 }
            let line = String(decoding: UnsafeRawBufferPointer(start: bytes, count: count), as: UTF8.self)
                .trimmingCharacters(in: .whitespacesAndNewlines)
            if line.hasPrefix("HTTP/") {
                contentType = nil
                isRedirect = line.split(separator: " ").dropFirst().first?.hasPrefix("3") ?? false
            } else if line.lowercased().hasPrefix("content-type:") {
                contentType = String(line.dropFirst("content-type:".count)).trimmingCharacters(in: .whitespaces)
            } else if line.isEmpty, !isRedirect {
                ended = true
                return 0
            }
            return count
        }
    }

    /// The Content-Type of a GET of `url` (http and https, at most 10 redirects), nil when there is
    /// none or the headers do not arrive within `timeout` seconds.
    static func contentType(_ url: String, timeout: Double) -> String? {
        guard case .success(let curl) = library, let handle = curl.initialize() else { return nil }
        defer { curl.cleanup(handle) }
        var headers = Headers()
        withUnsafeMutablePointer(to: &headers) { headers in
            // CURLOPT_HEADERFUNCTION and CURLOPT_HEADERDATA, CURLOPT_TIMEOUT_MS; the abandoned
            // transfer's error is expected.
            request(curl, handle, url)
            _ = curl.setWriter(handle, 20079) { bytes, size, count, headers in
                headers?.assumingMemoryBound(to: Headers.self).pointee.read(bytes, size * count) ?? 0
            }
            _ = curl.setPointer(handle, 10029, UnsafeMutableRawPointer(headers))
            _ = curl.setLong(handle, 155, Int((timeout * 1000).rounded(.up)))
            _ = curl.perform(handle)
        }
        return headers.ended ? headers.contentType : nil
    }
}

extension Data {
    /// The SHA-256 digest as 64 lowercase hex characters.
    package var sha256Hex: String {
        SHA256.hash(data: self).map { String(format: "%02x", $0) }.joined()
    }
}

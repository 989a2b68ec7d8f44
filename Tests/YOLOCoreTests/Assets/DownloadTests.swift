import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Downloads from a throwaway HTTP server on 127.0.0.1 (Python's http.server), into a
/// temporary cache directory: each test's own `ModelStore`, so nothing reads the environment.
final class DownloadTests: XCTestCase {
    private var server: Process?
    private var hostileServer: Process?
    private var root: URL!
    private var port = 0
    private var store: ModelStore!

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-download-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("www"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("cache"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: try weightsFile("yolo26n"), to: root.appendingPathComponent("www/yolo26n-served.safetensors"))
        store = ModelStore(searchDirectories: [], cacheDirectory: root.appendingPathComponent("cache"))
        (server, port) = try startPythonServer { ["-m", "http.server", String($0), "--bind", "127.0.0.1",
                                            "--directory", self.root.appendingPathComponent("www").path] }
    }

    override func tearDown() {
        for process in [server, hostileServer].compactMap({ $0 }) {
            process.terminate()
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(at: root)
    }

    /// Starts a server misbehaving by the first component of the path: `stall` sends the headers
    /// of a 1 MB body, then nothing; `drip` sends that body at 1 kB/s; `endless` sends a body
    /// without a length (32 MiB, then it stops); `loop/N/…` redirects to `loop/N+1/…` up to
    /// N = 30, then answers 404, and `ftp/N/…` redirects to an ftp URL. Each for at most 8 s.
    private func startHostileServer() throws -> Int {
        let script = """
            import signal, sys, time
            from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
            signal.pthread_sigmask(signal.SIG_SETMASK, [])  # spawned from a thread that blocks SIGTERM
            class Hostile(BaseHTTPRequestHandler):
                def do_GET(self):
                    _, kind, rest = self.path.split("/", 2)
                    if kind in ("loop", "ftp"):
                        n = int(rest.split("/")[0])
                        self.send_response(302 if n < 30 else 404)
                        base = "ftp://127.0.0.1:" + sys.argv[1] if kind == "ftp" else ""
                        self.send_header("Location", "%s/loop/%d/x.safetensors" % (base, n + 1))
                        self.send_header("Content-Length", "0"); self.end_headers(); return
                    self.send_response(200)
                    if kind != "endless": self.send_header("Content-Length", "1000000")
                    self.end_headers()
                    end, sent = time.time() + 8, 0
                    while time.time() < end and sent < 32 << 20:
                        if kind == "drip": self.wfile.write(b"x" * 100); sent += 100; time.sleep(0.1)
                        elif kind == "endless": self.wfile.write(b"x" * 65536); sent += 65536
                        else: time.sleep(0.1)
                def log_message(self, *args): pass
            ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Hostile).serve_forever()
            """
        let port: Int
        (hostileServer, port) = try startPythonServer { ["-c", script, String($0)] }
        return port
    }

    private var cacheContents: [String] {
        get throws { try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("cache").path).sorted() }
    }

    /// The cache's file name for `url`: a hash of the whole URL, then its last path component.
    private func cachedName(_ url: String, _ name: String) -> String {
        String(Data(url.utf8).sha256Hex.prefix(16)) + "-" + name
    }

    private func publish(_ data: Data, as path: String) throws {
        let file = root.appendingPathComponent("www/" + path)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try data.write(to: file)
    }

    /// yolo26n.safetensors records the SHA-256 of the checkpoint it was converted from.
    func testDigestMatchesTheOneRecordedInAWeightFile() throws {
        let data = try Data(contentsOf: try weightsDirectory().appendingPathComponent("yolo26n-w8.pt"))
        XCTAssertEqual(data.sha256Hex, "ed81bffa50fb2c4cf359bd62b8a3033c67a66202c8b907c7fb011475b2fe8045")
    }

    func testDownloadsOnceVerifiesAndLoadsFromCache() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!
        let digest = try Data(contentsOf: try weightsFile("yolo26n")).sha256Hex
        let model = try await YOLO(url: url, sha256: digest, store: store)
        XCTAssertEqual(model.names[0], "person")
        let cached = root.appendingPathComponent("cache/" + cachedName(url.absoluteString, "yolo26n-served.safetensors"))
        XCTAssertEqual(model.url.standardizedFileURL.path, cached.standardizedFileURL.path)
        // With the server gone, the cache still serves the model.
        server?.terminate()
        server?.waitUntilExit()
        let again = try await YOLO(url: url, sha256: digest, store: store)
        XCTAssertEqual(again.url.path, model.url.path)
        // Name lookup does not find it: a download is found by its URL only.
        XCTAssertThrowsError(try store.url(for: "yolo26n-served")) { error in
            guard case .modelNotFound(name: "yolo26n-served", _)? = error as? YOLOError else { return XCTFail("\(error)") }
        }
    }

    func testChecksumMismatchLeavesNoFileInTheCache() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!
        do {
            _ = try await YOLO(url: url, sha256: String(repeating: "0", count: 64), store: store)
            XCTFail("expected a checksum error")
        } catch let error as YOLOError {
            guard case .downloadFailed(_, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("SHA-256"), reason)
        }
        XCTAssertEqual(try cacheContents, [])
    }

    func testMissingFileIsAnHTTPError() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/nothing.safetensors")!
        do {
            _ = try await YOLO(url: url, store: store)
            XCTFail("expected a download error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .downloadFailed(url: url.absoluteString, reason: "HTTP status 404"))
        }
    }

    /// A body served with status 200 is cached only if it is a complete yolo-safetensors/1 file.
    func testTruncatedHTMLOrForeignBodiesAreNotCached() async throws {
        let weights = try Data(contentsOf: try weightsFile("yolo26n"))
        try publish(weights.prefix(weights.count / 2), as: "truncated.safetensors")
        let html = Data("<!DOCTYPE html>\n<html><body>Sign in to download</body></html>\n".utf8)
        try publish(html, as: "login.safetensors")
        let header = Data(#"{"__metadata__":{"task":"detect"},"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#.utf8)
        try publish(withUnsafeBytes(of: UInt64(header.count).littleEndian) { Data($0) } + header + Data(count: 4),
                    as: "foreign.safetensors")
        let cases = [("truncated", "truncated file?"),
                     ("login", "the body is \(html.count) bytes of HTML, not a safetensors file"),
                     ("foreign", "not a yolo-safetensors/1 file: its metadata has no 'format'")]
        for (name, expected) in cases {
            let url = URL(string: "http://127.0.0.1:\(port)/\(name).safetensors")!
            do {
                _ = try await YOLO(url: url, store: store)
                XCTFail("expected a download error for \(name)")
            } catch let error as YOLOError {
                guard case .downloadFailed(url.absoluteString, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains(expected), reason)
            }
        }
        XCTAssertEqual(try cacheContents, [])
    }

    /// Two URLs with the same last path component are two models; an encoded separator in
    /// that component stays inside the cache directory.
    func testCacheIsKeyedByTheWholeURL() async throws {
        try publish(try Data(contentsOf: try weightsFile("yolo26n")), as: "a/best.safetensors")
        try publish(try Data(contentsOf: try weightsFile("yolo26n-cls")), as: "b/best.safetensors")
        let a = "http://127.0.0.1:\(port)/a/best.safetensors", b = "http://127.0.0.1:\(port)/b/best.safetensors"
        let detect = try await YOLO(url: URL(string: a)!, store: store)
        let classify = try await YOLO(url: URL(string: b)!, store: store)
        XCTAssertEqual(detect.task, .detect)
        XCTAssertEqual(classify.task, .classify)
        let again = try await YOLO(url: URL(string: a)!, store: store)
        XCTAssertEqual(again.task, .detect)
        XCTAssertEqual(try cacheContents, [cachedName(a, "best.safetensors"), cachedName(b, "best.safetensors")].sorted())

        // http.server serves www/escape.safetensors for this path.
        try publish(try Data(contentsOf: try weightsFile("yolo26n")), as: "escape.safetensors")
        let escape = "http://127.0.0.1:\(port)/sub%2F..%2F..%2Fescape.safetensors"
        let model = try await YOLO(url: URL(string: escape)!, store: store)
        XCTAssertEqual(model.url.deletingLastPathComponent().standardizedFileURL.path,
                       root.appendingPathComponent("cache").standardizedFileURL.path)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.path).sorted(), ["cache", "www"])
        XCTAssertEqual(try cacheContents.count, 3)
    }

    /// A server that sends the headers and then nothing: a timeout error within seconds, and no
    /// partial file left behind.
    func testStalledDownloadTimesOut() async throws {
        let url = URL(string: "http://127.0.0.1:\(try startHostileServer())/stall/stalled.safetensors")!
        // The caller's timeout, then the store's.
        let attempts: [(Duration?, Duration)] = [(.seconds(1), .seconds(600)), (nil, .seconds(1))]
        for (timeout, storeTimeout) in attempts {
            store.downloadTimeout = storeTimeout
            let start = Date()
            do {
                _ = try await YOLO(url: url, timeout: timeout, store: store)
                XCTFail("expected a timeout")
            } catch let error as YOLOError {
                guard case .downloadFailed(url.absoluteString, let reason) = error else { return XCTFail("\(error)") }
                XCTAssertTrue(reason.contains("timed out after 1.0 s"), reason)
            }
            XCTAssertLessThan(Date().timeIntervalSince(start), 10)
            XCTAssertEqual(try cacheContents, [])
        }
    }

    /// A server dripping 1 kB/s, a tenth of the minimum average: a timeout once the 1 s grace is
    /// spent, where the stall rule alone (no byte for 1 s) waited for the whole megabyte.
    func testDrippingDownloadTimesOut() async throws {
        let url = URL(string: "http://127.0.0.1:\(try startHostileServer())/drip/slow.safetensors")!
        let start = Date()
        do {
            _ = try await YOLO(url: url, timeout: .seconds(1), store: store)
            XCTFail("expected a timeout")
        } catch let error as YOLOError {
            guard case .downloadFailed(url.absoluteString, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("under the 10000 bytes/s on average required after the first 1.0 s"), reason)
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
        XCTAssertEqual(try cacheContents, [])
    }

    /// A body over `maxDownloadBytes` fails, by its Content-Length before it is sent, else as
    /// it streams, leaving nothing in the cache; a limit that is not a positive whole number of
    /// bytes is a configuration error, in the store and in `YOLO_MAX_DOWNLOAD`.
    func testDownloadSizeIsLimited() throws {
        let announced = "http://127.0.0.1:\(port)/yolo26n-served.safetensors"
        let endless = "http://127.0.0.1:\(try startHostileServer())/endless/big.safetensors"
        store.maxDownloadBytes = 100_000
        for (url, reason) in [(announced, "the body's Content-Length exceeds the 100000-byte limit"),
                              (endless, "the body exceeds the 100000-byte limit")] {
            XCTAssertThrowsError(try store.url(for: url)) {
                XCTAssertEqual($0 as? YOLOError, .downloadFailed(url: url, reason: reason + " (ModelStore.maxDownloadBytes, YOLO_MAX_DOWNLOAD)"))
            }
        }
        XCTAssertEqual(try cacheContents, [])
        store.maxDownloadBytes = 0
        XCTAssertThrowsError(try store.url(for: announced)) {
            XCTAssertEqual($0 as? YOLOError, .invalidConfiguration(field: "maxDownloadBytes", value: "0", reason: "must be greater than 0"))
        }
        for value in ["lots", "0", "-1", "1e9"] {
            XCTAssertThrowsError(try ModelStore.fromEnvironment(["YOLO_MAX_DOWNLOAD": value])) {
                XCTAssertEqual($0 as? YOLOError, .invalidConfiguration(field: "YOLO_MAX_DOWNLOAD", value: value,
                                                                       reason: "must be a whole number of bytes greater than 0"))
            }
        }
    }

    /// A redirect loop ends at the tenth redirect (libcurl's default is no limit), and a redirect
    /// leaves neither HTTP nor HTTPS.
    func testRedirectsAreLimited() throws {
        let base = "http://127.0.0.1:\(try startHostileServer())"
        XCTAssertThrowsError(try store.url(for: base + "/loop/0/x.safetensors")) {
            XCTAssertEqual($0 as? YOLOError, .downloadFailed(url: base + "/loop/0/x.safetensors", reason: "Maximum (10) redirects followed"))
        }
        XCTAssertThrowsError(try store.url(for: base + "/ftp/0/x.safetensors")) {
            XCTAssertTrue(($0 as? LocalizedError)?.errorDescription?.contains(#"Protocol "ftp" not supported or disabled"#) == true, "\($0)")
        }
        XCTAssertEqual(try cacheContents, [])
    }

    /// A URL's file name longer than the cache keeps is cut to its end, not an error creating the file.
    func testLongFileNameIsShortened() throws {
        let name = String(repeating: "x", count: 200) + ".safetensors"
        try publish(try Data(contentsOf: try weightsFile("yolo26n")), as: name)
        let url = "http://127.0.0.1:\(port)/" + name
        XCTAssertEqual(try store.url(for: url).lastPathComponent, cachedName(url, String(name.suffix(128))))
    }

    /// A timeout out of range is a configuration error, not a trap in the conversion for libcurl.
    func testInvalidTimeoutIsAConfigurationError() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!
        XCTAssertThrowsError(try ModelStore.fromEnvironment(["YOLO_DOWNLOAD_TIMEOUT": "1e300"])) {
            guard case .invalidConfiguration("YOLO_DOWNLOAD_TIMEOUT", "1e300", _)? = $0 as? YOLOError else { return XCTFail("\($0)") }
        }
        store.downloadTimeout = .seconds(86_401)
        for (timeout, field) in [(nil, "downloadTimeout"), (Duration.seconds(0), "timeout")] as [(Duration?, String)] {
            do {
                _ = try await YOLO(url: url, timeout: timeout, store: store)
                XCTFail("expected a configuration error for \(field)")
            } catch let error as YOLOError {
                guard case .invalidConfiguration(field, _, _) = error else { return XCTFail("\(error)") }
            }
        }
    }

    /// The environment read into a store: every variable, and defaults when unset.
    func testStoreFromTheEnvironment() throws {
        let read = try ModelStore.fromEnvironment([
            "YOLO_WEIGHTS_DIR": "/w", "YOLO_CACHE_DIR": "/c", "YOLO_ASSETS_URL": "http://mirror/v8",
            "YOLO_OFFLINE": "1", "YOLO_DOWNLOAD_TIMEOUT": "2.5", "YOLO_MAX_DOWNLOAD": "1000", "XDG_CACHE_HOME": "/x"])
        XCTAssertEqual(read.searchDirectories.map(\.path), ["/w", FileManager.default.currentDirectoryPath + "/Weights"])
        XCTAssertEqual(read.cacheDirectory.path, "/c")
        XCTAssertEqual(read.assetsURL.absoluteString, "http://mirror/v8")
        XCTAssertTrue(read.offline)
        XCTAssertEqual(read.downloadTimeout, .milliseconds(2500))
        XCTAssertEqual(read.maxDownloadBytes, 1000)
        XCTAssertEqual(try ModelStore.fromEnvironment(["XDG_CACHE_HOME": "/x"]).cacheDirectory.path, "/x/yolo-swift")
        let plain = try ModelStore.fromEnvironment([:])
        XCTAssertEqual(plain, ModelStore())
        XCTAssertFalse(plain.offline)
        XCTAssertEqual(plain.assetsURL, ModelStore.ultralyticsAssets)
        XCTAssertThrowsError(try ModelStore.fromEnvironment(["YOLO_ASSETS_URL": "ftp://x"]))
    }

    /// Partial files older than a day (from a killed process) are removed by the next download.
    func testStalePartialFilesAreSwept() async throws {
        let cache = root.appendingPathComponent("cache")
        let stale = cache.appendingPathComponent(".old.safetensors.1.partial")
        let fresh = cache.appendingPathComponent(".new.safetensors.2.partial")
        for file in [stale, fresh] { try Data(count: 10).write(to: file) }
        try FileManager.default.setAttributes([.modificationDate: Date(timeIntervalSinceNow: -2 * 86_400)], ofItemAtPath: stale.path)
        _ = try await YOLO(url: URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!, store: store)
        XCTAssertFalse(FileManager.default.fileExists(atPath: stale.path))
        XCTAssertTrue(FileManager.default.fileExists(atPath: fresh.path))
    }

    /// An official name found nowhere downloads Ultralytics' release asset once, here from an
    /// `assetsURL` on loopback serving yolo26n-w8.pt as yolo26n.pt; an offline store refuses,
    /// naming what to place where.
    func testOfficialNameDownloadsTheReleaseAsset() async throws {
        let weights = root.appendingPathComponent("weights")
        try FileManager.default.createDirectory(at: weights, withIntermediateDirectories: true)
        let checkpoint = try weightsFile("yolo26n-w8.pt")
        let classifier = try Data(contentsOf: try weightsFile("yolo26n-cls"))
        store.searchDirectories = [weights]
        let base = "http://127.0.0.1:\(port)/v8.4.0"
        store.assetsURL = URL(string: base)!
        // A yolo26n.pt from elsewhere, here a classifier, never stands in for the official one.
        let impostor = "http://127.0.0.1:\(port)/elsewhere/yolo26n.pt"
        try publish(classifier, as: "elsewhere/yolo26n.pt")
        _ = try store.url(for: impostor)
        store.offline = true
        let local = [weights.path]
        XCTAssertThrowsError(try store.url(for: "yolo26n")) { error in
            XCTAssertEqual(error as? YOLOError, .offline(name: "yolo26n", url: base + "/yolo26n.pt", directories: local))
            XCTAssertEqual((error as? LocalizedError)?.errorDescription,
                           "model 'yolo26n' is not on this machine and offline mode (YOLO_OFFLINE=1) forbids downloading it from \(base)/yolo26n.pt; "
                               + "place yolo26n.pt (that file) or yolo26n.safetensors in " + local.joined(separator: " or "))
        }
        store.offline = false
        try publish(try Data(contentsOf: checkpoint), as: "v8.4.0/yolo26n.pt")
        let model = try await YOLO("yolo26n.pt", store: store)
        XCTAssertEqual(model.names[0], "person")
        let cached = cachedName(base + "/yolo26n.pt", "yolo26n.pt")
        XCTAssertEqual(try cacheContents, [cached, cachedName(impostor, "yolo26n.pt")].sorted())
        // From the cache from now on, offline too.
        store.offline = true
        XCTAssertEqual(try store.url(for: "yolo26n").lastPathComponent, cached)
        // Other names are never downloaded.
        XCTAssertThrowsError(try store.url(for: "yolo26q")) { error in
            guard case .modelNotFound(name: "yolo26q", _)? = error as? YOLOError else { return XCTFail("\(error)") }
        }
    }

    /// Ultralytics' release asset names (8.4.190 `GITHUB_ASSETS_NAMES`) in the families and
    /// tasks yolo-swift runs, and nothing else.
    func testOfficialNamesAreTheReleaseAssetsWeRun() {
        for name in ["yolo26n", "yolo26x-cls", "yolo11x-seg", "yolov8s-pose", "yolov8m-obb", "yolov8l-cls", "yolov8n-oiv7",
                     "yolo12n", "yolov10b", "yolov9t", "yolov9e-seg", "yolov5nu", "yolov5s6u", "yolov3u", "yolov3-tinyu",
                     "yolov3-sppu"] {
            XCTAssertTrue(ModelStore.isOfficial(name), name)
        }
        for name in ["yolo26q", "yolo12n-seg", "yolov9t-seg", "yolov10n-seg", "yolov5n", "yolov3", "yolov8s-world",
                     "yolo26n-sem", "rtdetr-l", "yolov6n", "yolov8n.pt"] {
            XCTAssertFalse(ModelStore.isOfficial(name), name)
        }
    }

    /// `YOLO("https://…")`, as `yolo predict --model URL` calls it, downloads through the cache.
    func testURLIsAcceptedAsAModelName() async throws {
        let url = "http://127.0.0.1:\(port)/yolo26n-served.safetensors"
        let model = try await YOLO(url, store: store)
        XCTAssertEqual(model.names[0], "person")
        XCTAssertEqual(try cacheContents, [cachedName(url, "yolo26n-served.safetensors")])
    }
}

import Foundation
import XCTest
import YOLOCore

/// Downloads from a throwaway HTTP server on 127.0.0.1 (Python's http.server), into a
/// temporary cache directory.
final class DownloadTests: XCTestCase {
    private var server: Process?
    private var root: URL!
    private var port = 0

    override func setUpWithError() throws {
        root = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-download-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: root.appendingPathComponent("www"), withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: root.appendingPathComponent("cache"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: try weightsFile("yolo26n"), to: root.appendingPathComponent("www/yolo26n-served.safetensors"))
        setenv("YOLO_CACHE_DIR", root.appendingPathComponent("cache").path, 1)
        port = Int.random(in: 20_000..<60_000)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", "-m", "http.server", String(port), "--bind", "127.0.0.1",
                             "--directory", root.appendingPathComponent("www").path]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        server = process
        // Wait (at most 10 s) until the server accepts connections (a TCP connect: Foundation
        // reads http URLs only with FoundationNetworking, which YOLOCore does not link).
        for _ in 0..<100 {
            if listening(port) { return }
            usleep(100_000)
        }
        XCTFail("the test HTTP server did not start")
    }

    override func tearDown() {
        server?.terminate()
        server?.waitUntilExit()
        unsetenv("YOLO_CACHE_DIR")
        try? FileManager.default.removeItem(at: root)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port`.
    private func listening(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    private func weightsFile(_ name: String) throws -> URL {
        let shared = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/weights")
        let directory = ProcessInfo.processInfo.environment["YOLO_WEIGHTS_DIR"].map { URL(fileURLWithPath: $0) } ?? shared
        return directory.appendingPathComponent(name + ".safetensors")
    }

    func testDownloadsOnceVerifiesAndLoadsFromCache() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!
        let digest = SHA256.hexDigest(try Data(contentsOf: try weightsFile("yolo26n")))
        let model = try await YOLO(url: url, sha256: digest)
        XCTAssertEqual(model.names[0], "person")
        let cached = root.appendingPathComponent("cache/yolo26n-served.safetensors")
        XCTAssertEqual(model.url.standardizedFileURL.path, cached.standardizedFileURL.path)
        // With the server gone, the cache still serves the model.
        server?.terminate()
        server?.waitUntilExit()
        let again = try await YOLO(url: url, sha256: digest)
        XCTAssertEqual(again.url.path, model.url.path)
        // And the name lookup finds it in the cache.
        XCTAssertEqual(try ModelLocator.url(for: "yolo26n-served").standardizedFileURL.path, cached.standardizedFileURL.path)
    }

    func testChecksumMismatchLeavesNoFileInTheCache() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/yolo26n-served.safetensors")!
        do {
            _ = try await YOLO(url: url, sha256: String(repeating: "0", count: 64))
            XCTFail("expected a checksum error")
        } catch let error as YOLOError {
            guard case .downloadFailed(_, let reason) = error else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("SHA-256"), reason)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("cache").path), [])
    }

    func testMissingFileIsAnHTTPError() async throws {
        let url = URL(string: "http://127.0.0.1:\(port)/nothing.safetensors")!
        do {
            _ = try await YOLO(url: url)
            XCTFail("expected a download error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .downloadFailed(url: url.absoluteString, reason: "HTTP status 404"))
        }
    }
}

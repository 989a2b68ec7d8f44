import Foundation
import XCTest
import YOLOCore

final class SHA256Tests: XCTestCase {
    func testKnownVectors() {
        XCTAssertEqual(SHA256.hexDigest([UInt8]()), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(SHA256.hexDigest(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(SHA256.hexDigest(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        // Split updates give the same digest as one.
        var h = SHA256()
        let message = Array(String(repeating: "yolo-swift ", count: 50).utf8)
        h.update(message[..<63])
        h.update(message[63...])
        XCTAssertEqual(h.hexDigest(), SHA256.hexDigest(message))
    }

    func testMatchesTheDigestRecordedInAWeightFile() throws {
        let shared = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared/weights")
        let directory = ProcessInfo.processInfo.environment["YOLO_SHARED_DIR"]
            .map { URL(fileURLWithPath: $0).appendingPathComponent("weights") } ?? shared
        // yolo26n.safetensors records the SHA-256 of the checkpoint it was converted from.
        let data = try Data(contentsOf: directory.appendingPathComponent("yolo26n-w8.pt"))
        XCTAssertEqual(SHA256.hexDigest(data), "ed81bffa50fb2c4cf359bd62b8a3033c67a66202c8b907c7fb011475b2fe8045")
    }
}

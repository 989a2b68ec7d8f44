import Foundation
import HummingbirdWSClient
import Logging
import Hummingbird
import Synchronization
import TestSupport
import XCTest
import YOLOCore
import YOLOServer

/// `GET /v1/stream`: a WebSocket of frames in, results out, tracked per connection.
final class StreamTests: XCTestCase {
    /// Three frames with `tracker=bytetrack` answer, in order, the records `yolo track` writes
    /// for them (the library's predictions through an `ObjectTracker`), IDs included; a text
    /// message that is not settings gets an error and the stream goes on; settings
    /// (`{"conf": 0.8, "max_det": 2}`) apply from the next frame, unanswered.
    func testTrackedStreamAnswersEachFrameInOrder() async throws {
        let frames = ["bus.jpg", "bus.jpg", "zidane.jpg"]
        let yolo = try await YOLO(try weightsFile("yolo26n").path)
        var tracker = ObjectTracker(.bytetrack)
        var expected = [String]()
        for (i, name) in frames.enumerated() {
            var result = try await yolo.predict(try sharedFile("images/\(name)").path)
            result.path = nil
            result.frame = i
            result = try tracker.update(result)
            expected.append(try canonical(jsonData(result)))
        }
        let ids = (field(expected[0], "boxes") as? [String: Any])?["id"] as? [Int]
        XCTAssertEqual(ids?.count, 5, "every box of the first frame is tracked")
        let data = try frames.map(imageData)
        let answers = try await withServer { client in
            let port = try XCTUnwrap(client.port)
            let received = Received()
            try await WebSocketClient.connect(url: "ws://localhost:\(port)/v1/stream?model=yolo26n&tracker=bytetrack",
                                              configuration: .init(maxFrameSize: 1 << 20), logger: Logger(label: "stream-test")) {
                inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 20).makeAsyncIterator()
                for frame in data {
                    try await outbound.writeBinaryMessage(ByteBuffer(bytes: frame))
                    if case let .text(text)? = try await messages.next() { received.append(text) }
                }
                try await outbound.writeTextMessage("hello")
                if case let .text(text)? = try await messages.next() { received.append(text) }
                // Settings from the next frame on, unanswered.
                try await outbound.writeTextMessage(#"{"conf": 0.8, "max_det": 2}"#)
                try await outbound.writeBinaryMessage(ByteBuffer(bytes: data[0]))
                if case let .text(text)? = try await messages.next() { received.append(text) }
                try await outbound.close(.normalClosure, reason: nil)
            }
            return received.texts
        }
        XCTAssertEqual(answers.count, 5)
        for (answer, record) in zip(answers, expected) {
            XCTAssertEqual(try canonical(Data(answer.utf8)), record)
        }
        XCTAssertEqual(try object(ByteBuffer(string: answers[3]))["error"] as? String,
                       #"parameter message=hello is invalid: a text message is a JSON object of settings, such as {"conf": 0.5}"#)
        let boxes = try XCTUnwrap(try object(ByteBuffer(string: answers[4]))["boxes"] as? [String: Any])
        let conf = try XCTUnwrap(boxes["conf"] as? [Double])
        XCTAssertEqual(conf.count, 2, "max_det 2 from the settings message")
        XCTAssertTrue(conf.allSatisfy { $0 >= 0.8 }, "\(conf)")
    }

    /// A stream that cannot start is refused before the upgrade, with the error as JSON.
    func testBadStreamIsRefused() async throws {
        try await withServer { client in
            let unknown = try await client.execute(uri: "/v1/stream?tracker=sort", method: .get)
            XCTAssertEqual(unknown.status, .badRequest)
            XCTAssertTrue((try object(unknown.body)["error"] as? String)?.hasPrefix("parameter tracker=sort is invalid") == true)
            let model = try await client.execute(uri: "/v1/stream?model=nope", method: .get)
            XCTAssertEqual(model.status, .notFound)
            let source = try await client.execute(uri: "/v1/stream?source=elsewhere", method: .get)
            XCTAssertEqual(source.status, .badRequest)
            XCTAssertTrue((try object(source.body)["error"] as? String)?.hasPrefix("parameter source=elsewhere is invalid") == true)
        }
    }

    /// `source=NAME`, a stream the server reads (`--source NAME=URL`): each frame comes as a
    /// binary JPEG message, then its results as text, frames counted from 0.
    func testServerSourceSendsFramesAndResults() async throws {
        let video = try sharedFile("videos/pan.mp4").path
        let messages = try await withServer({ $0.sources = ["pan": video] }) { client in
            let port = try XCTUnwrap(client.port)
            let received = Received()
            try await WebSocketClient.connect(url: "ws://localhost:\(port)/v1/stream?source=pan&model=yolo26n",
                                              configuration: .init(maxFrameSize: 1 << 22), logger: Logger(label: "source-test")) {
                inbound, outbound, _ in
                var messages = inbound.messages(maxSize: 1 << 22).makeAsyncIterator()
                for _ in 0..<6 {
                    switch try await messages.next() {
                    case let .binary(buffer)?: received.append("binary \(Data(buffer: buffer).prefix(3).map { String($0) }.joined(separator: ","))")
                    case let .text(text)?: received.append(text)
                    case nil: return
                    }
                }
                try await outbound.close(.normalClosure, reason: nil)
            }
            return received.texts
        }
        XCTAssertEqual(messages.count, 6)
        for pair in 0..<3 {
            XCTAssertEqual(messages[2 * pair], "binary 255,216,255", "a JPEG frame first")
            let record = try object(ByteBuffer(string: messages[2 * pair + 1]))
            XCTAssertEqual(record["frame"] as? Int, pair)
            XCTAssertEqual(record["orig_shape"] as? [Int], [360, 640])
        }
    }
}

/// Messages a WebSocket handler received, read after it ends.
private final class Received: Sendable {
    private let storage = Mutex<[String]>([])
    func append(_ text: String) { storage.withLock { $0.append(text) } }
    var texts: [String] { storage.withLock { $0 } }
}

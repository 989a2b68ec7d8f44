import Foundation
import Hummingbird
import HummingbirdTesting
import TestSupport
import XCTest
import YOLOServer

/// Bad requests get a JSON error with their status, and the server goes on serving.
final class ErrorTests: XCTestCase {
    /// Each bad request in turn: its status and message; afterwards `/readyz` and a good
    /// prediction still answer.
    func testErrorsLeaveTheServerReady() async throws {
        let zidane = try imageData("zidane.jpg")
        try await withServer({ $0.maxBody = 1 << 20; $0.maxPixels = 900_000 }) { client in
            let jpeg: HTTPFields = [.contentType: "image/jpeg"]
            let small = ByteBuffer(bytes: try imageData("bus.jpg").prefix(20_000))
            let cases: [(String, HTTPFields, ByteBuffer, HTTPResponse.Status, String)] = [
                ("/v1/predict", jpeg, ByteBuffer(bytes: Data("not an image".utf8)), .badRequest, "is not a JPEG or PNG image"),
                ("/v1/predict", jpeg, small, .badRequest, "is truncated"),
                ("/v1/predict", [.contentType: "text/plain"], small, .unsupportedMediaType, "content type 'text/plain' is not accepted"),
                ("/v1/predict", [:], small, .unsupportedMediaType, "content type '' is not accepted"),
                ("/v1/predict?model=yolo99", jpeg, small, .notFound, "no model 'yolo99' is served"),
                ("/v1/predict?conf=1.5", jpeg, small, .badRequest, "parameter conf=1.5 is invalid: must be a number in 0…1"),
                ("/v1/predict?imgsz=99999", jpeg, small, .badRequest, "parameter imgsz=99999 is invalid"),
                ("/v1/predict?max_det=0", jpeg, small, .badRequest, "parameter max_det=0 is invalid"),
                ("/v1/predict?classes=a", jpeg, small, .badRequest, "parameter classes=a is invalid"),
                ("/v1/predict?format=gif", jpeg, small, .badRequest, "parameter format=gif is invalid"),
                ("/v1/predict", jpeg, ByteBuffer(bytes: zidane), .contentTooLarge, "the image claims 1280×720 pixels, more than the limit of 900000"),
                ("/v1/predict", [.contentType: "image/png"], ByteBuffer(repeating: 0, count: 1_500_000), .contentTooLarge, "larger than the limit of 1048576 bytes"),
                ("/v1/predict", [.contentType: "multipart/form-data; boundary=x"], small, .badRequest, "the multipart form cannot be used"),
                ("/predict", jpeg, small, .unsupportedMediaType, "send multipart/form-data with a field 'file'"),
            ]
            for (uri, headers, body, status, message) in cases {
                let response = try await client.execute(uri: uri, method: .post, headers: headers, body: body)
                XCTAssertEqual(response.status, status, uri)
                XCTAssertEqual(response.headers[.contentType], "application/json", uri)
                let error = try XCTUnwrap(try object(response.body)["error"] as? String, uri)
                XCTAssertTrue(error.contains(message), "\(uri): \(error)")
                let ready = try await client.execute(uri: "/readyz", method: .get)
                XCTAssertEqual(ready.status, .ok, "ready after \(uri) \(status)")
            }
            let good = try await client.execute(uri: "/v1/predict?imgsz=320", method: .post, headers: jpeg,
                                                body: ByteBuffer(bytes: try imageData("bus.jpg")))
            XCTAssertEqual(good.status, .ok, String(buffer: good.body))
        }
    }

    /// A body declared larger than the limit is refused from its headers, before it is read.
    func testDeclaredLengthOverTheLimit() async throws {
        try await withServer({ $0.maxBody = 1000 }) { client in
            let response = try await client.execute(uri: "/v1/predict", method: .post, headers: [.contentType: "image/jpeg"],
                                                    body: ByteBuffer(bytes: [UInt8](repeating: 0xFF, count: 5000)))
            XCTAssertEqual(response.status, .contentTooLarge)
            XCTAssertEqual(try object(response.body)["error"] as? String,
                           "the request body is larger than the limit of 1000 bytes (--max-body)")
        }
    }

    /// One worker and a queue of 2: of 8 requests sent at once, those beyond the worker and the
    /// queue get 429 with Retry-After; the metrics count every answer by its code.
    func testQueueFullAnswers429AndMetricsCount() async throws {
        let boats = try imageData("boats.jpg")
        try await withServer({ $0.workers = 1; $0.queue = 2 }) { client in
            let port = try XCTUnwrap(client.port)
            let statuses = try await withThrowingTaskGroup(of: (HTTPResponse.Status, String?).self) { group in
                for _ in 0..<8 {
                    group.addTask {
                        let connection = TestClient(host: "localhost", port: port)
                        connection.connect()
                        let response = try await connection.execute(.init("/v1/predict", method: .post, authority: "localhost",
                                                                          headers: [.contentType: "image/jpeg"], body: ByteBuffer(bytes: boats)))
                        try await connection.shutdown()
                        return (response.status, response.headers[.retryAfter])
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            let ok = statuses.filter { $0.0 == .ok }.count, refused = statuses.filter { $0.0 == .tooManyRequests }
            XCTAssertEqual(ok + refused.count, 8, "\(statuses)")
            XCTAssertGreaterThanOrEqual(ok, 3, "the worker and the queue of 2 are served")
            XCTAssertGreaterThanOrEqual(refused.count, 1, "8 at once overflow 1 worker and a queue of 2")
            XCTAssertTrue(refused.allSatisfy { $0.1 == "1" }, "Retry-After on every 429")
            let metrics = String(buffer: try await client.execute(uri: "/metrics", method: .get).body)
            XCTAssertTrue(metrics.contains(#"yolo_requests_total{code="200"} \#(ok)"#), metrics)
            XCTAssertTrue(metrics.contains(#"yolo_requests_total{code="429"} \#(refused.count)"#), metrics)
            XCTAssertTrue(metrics.contains("yolo_inference_duration_seconds_count \(ok)"), metrics)
            XCTAssertTrue(metrics.contains("yolo_queue_wait_seconds_count \(ok)"), metrics)
            XCTAssertTrue(metrics.contains("yolo_request_duration_seconds_count 8"), metrics)
            XCTAssertTrue(metrics.contains("yolo_inference_in_flight 0.0"), metrics)
            XCTAssertTrue(metrics.contains("yolo_queue_length 0.0"), metrics)
        }
    }
}

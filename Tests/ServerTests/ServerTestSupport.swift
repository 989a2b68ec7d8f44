import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import TestSupport
import XCTest
import YOLOCore
import YOLOServer

/// The five tasks' models, loaded once for every server the tests start.
let servedModels: ServedModels? = try? ServedModels(["yolo26n", "yolo26n-seg", "yolo26n-pose", "yolo26n-obb", "yolo26n-cls"].map { try weightsFile($0).path })

/// A server with the test models on a free loopback port: `configure` adjusts its limits, `body`
/// talks to it.
func withServer<Value: Sendable>(_ configure: (inout ServerConfiguration) -> Void = { _ in },
                                 _ body: @Sendable (any TestClientProtocol) async throws -> Value) async throws -> Value {
    let weights = try weightsDirectory().path
    let models = try XCTUnwrap(servedModels, "the five yolo26n weight files are not all in \(weights)")
    try await models.load()
    var configuration = ServerConfiguration(models: models.names)
    configuration.port = 0
    configuration.workers = 2
    configure(&configuration)
    var logger = Logger(label: "yolo-serve-tests")
    logger.logLevel = .warning
    return try await InferenceServer(configuration, models: models, logger: logger).application().test(.live, body)
}

/// A `multipart/form-data` body with `fields` and a file part `file` named `filename`.
func multipart(file: (name: String, filename: String, data: Data), fields: [(String, String)] = []) -> (body: ByteBuffer, contentType: String) {
    let boundary = "yolo-swift-test-boundary"
    var body = Data()
    for (name, value) in fields {
        body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)\r\n".utf8)
    }
    body += Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"\(file.name)\"; filename=\"\(file.filename)\"\r\nContent-Type: image/jpeg\r\n\r\n".utf8)
    body += file.data + Data("\r\n--\(boundary)--\r\n".utf8)
    return (ByteBuffer(bytes: body), "multipart/form-data; boundary=\(boundary)")
}

/// A test image's bytes.
func imageData(_ name: String) throws -> Data { try Data(contentsOf: try sharedFile("images/\(name)")) }

/// A response body as a JSON object.
func object(_ body: ByteBuffer) throws -> [String: Any] {
    try XCTUnwrap(JSONSerialization.jsonObject(with: Data(buffer: body)) as? [String: Any], String(buffer: body))
}

/// A result record as canonical JSON text (sorted keys), without what differs between runs
/// (`speed_ms`) or names the input (`image`).
func canonical(_ record: Data) throws -> String {
    var object = try XCTUnwrap(JSONSerialization.jsonObject(with: record) as? [String: Any], String(decoding: record, as: UTF8.self))
    object["speed_ms"] = nil
    object["image"] = nil
    return String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self)
}

/// A record's field, decoded from its canonical text.
func field(_ record: String, _ key: String) -> Any? {
    (try? JSONSerialization.jsonObject(with: Data(record.utf8)) as? [String: Any])?[key]
}

import Foundation
import HTTPTypes
import Hummingbird
import YOLOCore

/// Why a request failed, with the HTTP status it answers with. Every failure reaches the client
/// as JSON `{"error": "…"}` (`HTTPResponseError`), never as a crash or a dropped connection.
public enum ServerError: Error, LocalizedError, Equatable {
    /// The body is not an image the decoders accept (corrupt, truncated, neither JPEG nor PNG).
    case badImage(reason: String)
    /// The body's media type is none the route takes.
    case unsupportedMediaType(contentType: String, accepted: String)
    /// A multipart body without the field that carries the image, or malformed.
    case badForm(reason: String)
    /// No model of that name is served.
    case unknownModel(name: String, served: [String])
    /// A query or form parameter that cannot be used.
    case badParameter(name: String, value: String, reason: String)
    /// The body is longer than `--max-body`.
    case bodyTooLarge(limit: Int)
    /// The image's header claims more pixels than `--max-pixels`.
    case imageTooLarge(width: Int, height: Int, maxPixels: Int)
    /// Every worker is busy and the queue is full.
    case queueFull(queue: Int, retryAfter: Int)
    /// The models are still loading.
    case notReady
    /// The model failed on a valid request (a bug, not the client's fault).
    case inference(reason: String)

    public var errorDescription: String? {
        switch self {
        case let .badImage(reason): "the image cannot be used: \(reason)"
        case let .unsupportedMediaType(contentType, accepted):
            "content type '\(contentType)' is not accepted here; send \(accepted)"
        case let .badForm(reason): "the multipart form cannot be used: \(reason)"
        case let .unknownModel(name, served):
            "no model '\(name)' is served; served: " + served.joined(separator: ", ")
        case let .badParameter(name, value, reason): "parameter \(name)=\(value) is invalid: \(reason)"
        case let .bodyTooLarge(limit): "the request body is larger than the limit of \(limit) bytes (--max-body)"
        case let .imageTooLarge(width, height, maxPixels):
            "the image claims \(width)×\(height) pixels, more than the limit of \(maxPixels) (--max-pixels)"
        case let .queueFull(queue, retryAfter):
            "every worker is busy and the queue of \(queue) is full; retry after \(retryAfter) s"
        case .notReady: "the models are loading; retry when /readyz answers 200"
        case let .inference(reason): "inference failed: \(reason)"
        }
    }

    /// The status each failure answers with.
    public var status: HTTPResponse.Status {
        switch self {
        case .badImage, .badForm, .badParameter: .badRequest
        case .unsupportedMediaType: .unsupportedMediaType
        case .unknownModel: .notFound
        case .bodyTooLarge, .imageTooLarge: .contentTooLarge
        case .queueFull: .tooManyRequests
        case .notReady: .serviceUnavailable
        case .inference: .internalServerError
        }
    }

    /// A library error met while serving a request, as the client's failure it is (or a server
    /// failure when it is not the client's).
    init(_ error: any Error) {
        switch error {
        case let error as ServerError: self = error
        case let ImageError.tooLarge(_, width, height, maxPixels): self = .imageTooLarge(width: width, height: height, maxPixels: maxPixels)
        case let error as ImageError: self = .badImage(reason: error.localizedDescription)
        case let YOLOError.invalidConfiguration(field, value, reason): self = .badParameter(name: field, value: value, reason: reason)
        case let YOLOError.memoryBudgetExceeded(imageSize, _, _, _, _, largest):
            self = .badParameter(name: "imgsz", value: "\(imageSize)",
                                 reason: "needs more working memory than a worker has" + (largest.map { "; \($0) or less fits" } ?? ""))
        case let YOLOError.taskMismatch(model, task, requested):
            self = .badParameter(name: "task", value: requested, reason: "\(model) is a \(task) model")
        default: self = .inference(reason: (error as? LocalizedError)?.errorDescription ?? "\(error)")
        }
    }
}

extension ServerError: HTTPResponseError {
    public var headers: HTTPFields {
        if case let .queueFull(_, retryAfter) = self { return [.retryAfter: String(retryAfter)] }
        return [:]
    }

    public func response(from request: Request, context: some RequestContext) throws -> Response {
        var response = Response.json(["error": errorDescription ?? "\(self)"], status: status)
        response.headers.append(contentsOf: headers)
        return response
    }
}

/// `value` as JSON with sorted keys, as `yolo predict --save-json` writes its records.
package func jsonData(_ value: some Encodable) -> Data {
    let encoder = JSONEncoder()
    encoder.outputFormatting = [.sortedKeys]
    // Only a non-finite number fails to encode, which no result holds: an error names the bug.
    return (try? encoder.encode(value)) ?? Data(#"{"error":"the response could not be encoded as JSON"}"#.utf8)
}

extension Response {
    /// `value` as a JSON body.
    static func json(_ value: some Encodable, status: HTTPResponse.Status = .ok) -> Response {
        Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: jsonData(value))))
    }
}

extension HTTPField.Name {
    /// Where a prediction's time went (`queue;dur=…, inference;dur=…`, milliseconds).
    package static let serverTiming = Self("Server-Timing")!
}

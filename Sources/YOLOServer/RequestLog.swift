import Foundation
import Hummingbird
import Logging

/// One log line per request (its id, method, path, status, duration and `Server-Timing`), and
/// the request metrics: `yolo_requests_total{code}` and the request duration histogram.
struct RequestLog<Context: RequestContext>: RouterMiddleware {
    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        let start = ContinuousClock.now
        var status = 500
        var timing: String?
        defer {
            let duration = ContinuousClock.now - start
            metrics.count(status: status)
            metrics.requests.recordNanoseconds(duration.nanoseconds)
            var metadata: Logger.Metadata = ["id": .string(context.id), "method": .string(request.method.rawValue),
                                             "path": .string(request.uri.path), "status": .stringConvertible(status),
                                             "duration_ms": .string(String(format: "%.1f", duration.milliseconds))]
            if let timing { metadata["timing"] = .string(timing) }
            context.logger.info("request", metadata: metadata)
        }
        do {
            let response = try await next(request, context)
            status = Int(response.status.code)
            timing = response.headers[.serverTiming]
            return response
        } catch let error as any HTTPResponseError {
            status = Int(error.status.code)
            throw error
        }
    }
}

/// Log lines as JSON objects (`yolo serve --log-format json`), one a line on stderr, for log
/// collectors: `time`, `level`, `label`, `message` and the metadata's keys.
public struct JSONLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level = .info
    private let label: String

    public init(label: String) { self.label = label }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var fields = ["time": ISO8601DateFormatter().string(from: Date()), "level": event.level.rawValue, "label": label,
                      "message": event.message.description]
        for (key, value) in metadata.merging(event.metadata ?? [:], uniquingKeysWith: { $1 }) { fields[key] = value.description }
        FileHandle.standardError.write(jsonData(fields) + Data("\n".utf8))
    }
}

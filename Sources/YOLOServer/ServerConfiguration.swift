import Foundation
import YOLOCore

/// What `yolo serve` serves and its limits.
public struct ServerConfiguration: Sendable {
    /// Model names or paths, as `YOLO(_:)` takes them; the first answers requests that name none.
    public var models: [String]
    public var host = "127.0.0.1"
    /// 0 takes a free port (tests).
    public var port = 8080
    /// Inference slots: predictions that run at once, each on `threadsPerWorker` threads.
    public var workers = ProcessInfo.processInfo.activeProcessorCount
    public var threadsPerWorker = 1
    /// Requests that may wait for a worker; more get 429.
    public var queue = 64
    /// Largest request body read, in bytes.
    public var maxBody = 32 << 20
    /// Largest width · height of an image decoded.
    public var maxPixels = Image.defaultMaxPixels
    /// Seconds the requests in flight may take to finish after SIGTERM or SIGINT.
    public var drainTimeout = 30.0
    /// Where the weights are found.
    public var store: ModelStore?
    /// Streams the server reads for `/v1/stream?source=NAME` (`--source NAME=URL`): a video file,
    /// stream URL or camera, as `yolo predict --source` takes them. Clients name one; they never
    /// make the server open a URL of their own.
    public var sources: [String: String] = [:]

    public init(models: [String]) { self.models = models }

    /// Throws `ServerError.badParameter` naming the first value out of range.
    func validate() throws {
        func fail(_ name: String, _ value: Any, _ reason: String) -> ServerError {
            .badParameter(name: name, value: "\(value)", reason: reason)
        }
        guard !models.isEmpty else { throw fail("--model", "", "give at least one model") }
        guard (0...65535).contains(port) else { throw fail("--port", port, "must be in 0…65535") }
        guard (1...1024).contains(workers) else { throw fail("--workers", workers, "must be in 1…1024") }
        guard (1...1024).contains(threadsPerWorker) else { throw fail("--threads", threadsPerWorker, "must be in 1…1024") }
        guard (0...1_000_000).contains(queue) else { throw fail("--queue", queue, "must be in 0…1000000") }
        guard maxBody >= 1 else { throw fail("--max-body", maxBody, "must be at least 1 byte") }
        guard maxPixels >= 1 else { throw fail("--max-pixels", maxPixels, "must be at least 1") }
        guard drainTimeout >= 0, drainTimeout.isFinite else { throw fail("--drain-timeout", drainTimeout, "must be ≥ 0 seconds") }
    }
}

import ArgumentParser
import Foundation
import Logging
import YOLOCore
import YOLOServer

/// `yolo serve`: an HTTP inference server (YOLOServer) for many clients at once.
struct Serve: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Serve models over HTTP: POST /v1/predict, Ultralytics' POST /predict, a WebSocket stream, metrics and health checks.",
        discussion: """
        curl -X POST --data-binary @bus.jpg -H 'Content-Type: image/jpeg' 'http://127.0.0.1:8080/v1/predict?conf=0.5'. \
        Routes: POST /v1/predict, POST /predict, GET /v1/models, /v1/stream (WebSocket), /healthz, /readyz, /metrics. \
        SIGTERM or SIGINT stops accepting connections and lets the requests in flight finish (--drain-timeout).
        """)

    @Option(help: "A model name or path to serve; repeat for more (the first answers requests that name none).")
    var model: [String] = ["yolo26n"]

    @Option(help: "Address to listen on (0.0.0.0 for every interface).")
    var host = "127.0.0.1"

    @Option(help: "Port to listen on (0: any free port, printed when listening).")
    var port = 8080

    @Option(help: "Inference slots: predictions run at once, each on --threads threads (default: one per core).")
    var workers = ProcessInfo.processInfo.activeProcessorCount

    @Option(help: "Threads each prediction uses.")
    var threads = 1

    @Option(help: "Requests that may wait for a worker; more are answered 429 with Retry-After.")
    var queue = 64

    @Option(name: .customLong("max-body"), help: "Largest request body in bytes; larger ones are answered 413.")
    var maxBody = 32 << 20

    @Option(name: .customLong("max-pixels"), help: "Largest width × height of an image; larger ones are answered 413.")
    var maxPixels = Image.defaultMaxPixels

    @Option(name: .customLong("drain-timeout"), help: "Seconds the requests in flight may take to finish after SIGTERM or SIGINT.")
    var drainTimeout = 30.0

    @Option(help: "A stream the live view may show (GET /?source=NAME), NAME=URL: a video file, stream URL or camera; repeat for more.")
    var source: [String] = []

    @Option(name: .customLong("log-format"), help: "Log lines as text or json (one object a line), on stderr.")
    var logFormat: LogFormat = .text

    enum LogFormat: String, ExpressibleByArgument { case text, json }

    func run() async throws {
        var configuration = ServerConfiguration(models: model)
        configuration.host = host
        configuration.port = port
        configuration.workers = workers
        configuration.threadsPerWorker = threads
        configuration.queue = queue
        configuration.maxBody = maxBody
        configuration.maxPixels = maxPixels
        configuration.drainTimeout = drainTimeout
        for pair in source {
            let parts = pair.split(separator: "=", maxSplits: 1).map(String.init)
            guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else {
                throw CommandFailure(message: "--source \(pair) is not NAME=URL, e.g. door=rtsp://camera/stream")
            }
            configuration.sources[parts[0]] = parts[1]
        }
        let format = logFormat
        LoggingSystem.bootstrap { label in
            format == .json ? JSONLogHandler(label: label) as any LogHandler : StreamLogHandler.standardError(label: label)
        }
        do {
            try await InferenceServer(configuration, logger: Logger(label: "yolo-serve")).run()
        } catch {
            throw CommandFailure(error)
        }
    }
}

import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import ServiceLifecycle
import YOLOCore

/// The HTTP inference server behind `yolo serve`: one warm copy of each model, predictions on a
/// bounded pool of workers, every answer JSON (or an annotated JPEG), metrics and health checks.
/// Stateless between requests, so replicas scale behind a load balancer (docs/DEPLOY.md).
public struct InferenceServer: Sendable {
    public let configuration: ServerConfiguration
    let models: ServedModels
    let pool: WorkerPool
    let metrics = ServerMetrics()
    let logger: Logger
    /// The settings a request starts from: one thread per worker, the pixel limit, and the
    /// memory budget shared by the workers.
    let base: YOLOConfiguration

    /// A server for `configuration`; `models` (default: `configuration.models`, loaded when the
    /// server starts) lets tests share loaded models between servers.
    public init(_ configuration: ServerConfiguration, models: ServedModels? = nil, logger: Logger) throws {
        try configuration.validate()
        self.configuration = configuration
        self.models = models ?? ServedModels(configuration.models, store: configuration.store)
        self.logger = logger
        pool = WorkerPool(workers: configuration.workers, queue: configuration.queue, metrics: metrics)
        var base = YOLOConfiguration()
        base.threads = configuration.threadsPerWorker
        base.maxImagePixels = configuration.maxPixels
        base.memoryBudget = YOLOConfiguration.defaultMemoryBudget / configuration.workers
        self.base = base
    }

    /// The Hummingbird application: the routes, and the models loaded as it starts (`/readyz`
    /// answers 503 until they are warm).
    public func application() -> some ApplicationProtocol {
        let router = Router(context: BasicWebSocketRequestContext.self)
        router.middlewares.add(RequestLog(metrics: metrics))
        router.get("/") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/html; charset=utf-8"], body: .init(byteBuffer: ByteBuffer(bytes: PackageResources.live_html)))
        }
        router.get("/healthz") { _, _ in Response.json(["status": "alive"]) }
        router.get("/readyz") { _, _ in
            models.isReady ? Response.json(["status": "ready"]) : Response.json(["error": "the models are loading"], status: .serviceUnavailable)
        }
        router.get("/metrics") { _, _ in
            Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"], body: .init(byteBuffer: ByteBuffer(bytes: metrics.text())))
        }
        router.get("/v1/models") { _, _ in try ready(); return Response.json(models.descriptions) }
        router.post("/v1/predict") { request, _ in try await predictV1(request) }
        router.post("/predict") { request, _ in try await predictUltralytics(request) }
        // Reached only when the request did not upgrade: names why.
        router.get("/v1/stream") { request, _ -> Response in
            _ = try streamSettings(request.uri.queryParameters)
            throw ServerError.badParameter(name: "Upgrade", value: request.headers[.upgrade] ?? "", reason: "this route upgrades to a WebSocket")
        }

        let streams = Router(context: BasicWebSocketRequestContext.self)
        streams.ws("/v1/stream") { request, _ in
            // A request that would fail falls through to the HTTP route, which answers its error.
            (try? streamSettings(request.uri.queryParameters)) == nil ? .dontUpgrade : .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            try await stream(inbound, outbound, query: context.request.uri.queryParameters)
        }

        return Application(
            router: router,
            server: .http1WebSocketUpgrade(webSocketRouter: streams,
                                           configuration: .init(ws: .init(maxFrameSize: min(configuration.maxBody, 1 << 24)))),
            configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "yolo-swift"),
            services: [ModelLoader(models: models, logger: logger)],
            onServerRunning: { [logger] channel in
                logger.info("listening", metadata: ["address": .string(channel.localAddress?.ipAddress ?? "?"),
                                                    "port": .stringConvertible(channel.localAddress?.port ?? 0)])
            },
            logger: logger)
    }

    /// Runs the server until SIGTERM or SIGINT, then stops accepting connections and lets the
    /// requests in flight finish, for at most `drainTimeout` seconds.
    public func run() async throws {
        var configuration = ServiceGroupConfiguration(
            services: [.init(service: application())], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        configuration.maximumGracefulShutdownDuration = .milliseconds(Int64(self.configuration.drainTimeout * 1000))
        try await ServiceGroup(configuration: configuration).run()
    }

    /// Query parameters as strings; the last of a repeated name wins.
    private func strings(_ query: Hummingbird.Parameters) -> [String: String] {
        Dictionary(query.map { (String($0.key), String($0.value)) }, uniquingKeysWith: { $1 })
    }

    private func ready() throws {
        guard models.isReady else { throw ServerError.notReady }
    }

    /// The main type of a `Content-Type` value, lowercased (`image/jpeg` of `image/jpeg; q=1`).
    private func mediaType(_ contentType: String) -> String {
        contentType.split(separator: ";").first.map { $0.trimmingCharacters(in: .whitespaces).lowercased() } ?? ""
    }

    /// The request's body, read no further than `--max-body`.
    private func body(_ request: Request) async throws -> Data {
        if let length = request.headers[.contentLength].flatMap({ Int($0) }), length > configuration.maxBody {
            throw ServerError.bodyTooLarge(limit: configuration.maxBody)
        }
        var request = request
        do {
            return Data(buffer: try await request.collectBody(upTo: configuration.maxBody))
        } catch let error as HTTPResponseError where error.status == .contentTooLarge {
            throw ServerError.bodyTooLarge(limit: configuration.maxBody)
        }
    }

    /// One prediction's input: the image's bytes, the file name its record carries, the model
    /// and the settings.
    private struct Job: Sendable {
        let image: Data, name: String?, model: ServedModel, parameters: PredictParameters
    }

    /// Reads a job with `read` (once admitted to the worker pool), decodes its image and runs its
    /// model in a worker, with the annotated JPEG when asked: the request's CPU work off the
    /// server's threads.
    private func predict(reading read: () async throws -> Job) async throws -> (Results, jpeg: Data?, WorkerPool.Timings) {
        do {
            let ((result, jpeg), timings) = try await pool.run(reading: read) { job, cancellation in
                let settings = job.parameters.configuration
                let image = try Image(data: job.image, maxPixels: settings.maxImagePixels)
                var result = try job.model.yolo(image, task: nil, configuration: settings, cancellation: cancellation)
                result.path = job.name
                return (result, try job.parameters.annotated ? result.annotated().jpegData() : nil)
            }
            return (result, jpeg, timings)
        } catch {
            throw ServerError(error)
        }
    }

    /// `POST /v1/predict`: the image as the body (`image/jpeg`, `image/png`) or as the `image`
    /// field of a form; parameters in the query. Answers `yolo predict --save-json`'s record.
    private func predictV1(_ request: Request) async throws -> Response {
        try ready()
        let parameters = try PredictParameters(strings(request.uri.queryParameters), base: base)
        let model = try models.model(named: parameters.model)
        let contentType = request.headers[.contentType] ?? ""
        let form: Bool
        switch mediaType(contentType) {
        case "image/jpeg", "image/png": form = false
        case "multipart/form-data": form = true
        default:
            throw ServerError.unsupportedMediaType(contentType: contentType, accepted: "image/jpeg, image/png or multipart/form-data with a field 'image'")
        }
        let (result, jpeg, timings) = try await predict {
            guard form else { return Job(image: try await body(request), name: nil, model: model, parameters: parameters) }
            let parts = try FormPart.parse(try await body(request), contentType: contentType)
            guard let part = parts.first(where: { $0.name == "image" }) else {
                throw ServerError.badForm(reason: "no field 'image' (fields: \(parts.map(\.name).joined(separator: ", ")))")
            }
            return Job(image: part.data, name: part.filename, model: model, parameters: parameters)
        }
        var response = jpeg.map { Response(status: .ok, headers: [.contentType: "image/jpeg"], body: .init(byteBuffer: ByteBuffer(bytes: $0))) }
            ?? .json(result)
        response.headers[.serverTiming] = timings.header
        return response
    }

    /// `POST /predict`: Ultralytics' hosted API (a form with the image as `file` and the fields
    /// `model`, `imgsz`, `conf`, `iou`).
    private func predictUltralytics(_ request: Request) async throws -> Response {
        try ready()
        let contentType = request.headers[.contentType] ?? ""
        guard mediaType(contentType) == "multipart/form-data" else {
            throw ServerError.unsupportedMediaType(contentType: contentType, accepted: "multipart/form-data with a field 'file'")
        }
        let (result, _, timings) = try await predict {
            let parts = try FormPart.parse(try await body(request), contentType: contentType)
            guard let file = parts.first(where: { $0.name == "file" }) else {
                throw ServerError.badForm(reason: "no field 'file' (fields: \(parts.map(\.name).joined(separator: ", ")))")
            }
            var fields = [String: String]()
            for part in parts where part.filename == nil && part.name != "file" { fields[part.name] = part.text }
            fields["format"] = nil
            let parameters = try PredictParameters(fields, base: base)
            return Job(image: file.data, name: file.filename, model: try models.model(named: parameters.model), parameters: parameters)
        }
        var response = Response.json(UltralyticsResponse(result))
        response.headers[.serverTiming] = timings.header
        return response
    }

    /// A stream's model, settings and tracker, from the upgrade request's query.
    private func streamSettings(_ query: Hummingbird.Parameters) throws -> (ServedModel, PredictParameters, TrackerConfiguration?) {
        try ready()
        let parameters = try PredictParameters(strings(query), base: base)
        let tracker = try query["tracker"].map { name in
            // Built-in trackers only: a client must not make the server read files.
            guard let algorithm = TrackerConfiguration.Algorithm(rawValue: String(name)) else {
                throw ServerError.badParameter(name: "tracker", value: String(name),
                                               reason: "use " + TrackerConfiguration.Algorithm.allCases.map(\.rawValue).joined(separator: ", "))
            }
            return TrackerConfiguration(algorithm: algorithm)
        }
        if let name = query["source"], configuration.sources[String(name)] == nil {
            throw ServerError.badParameter(name: "source", value: String(name),
                                           reason: "the server reads no such stream (yolo serve --source NAME=URL)")
        }
        return (try models.model(named: parameters.model), parameters, tracker)
    }

    /// A stream's text message: a JSON object of the query's parameters (`{"conf": 0.5}`), applied
    /// over the stream's current ones from the next frame on.
    private func streamUpdate(_ text: String, over current: PredictParameters) throws -> (ServedModel, PredictParameters) {
        guard let object = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] else {
            throw ServerError.badParameter(name: "message", value: String(text.prefix(40)),
                                           reason: "a text message is a JSON object of settings, such as {\"conf\": 0.5}")
        }
        var values = object.mapValues { value in (value as? [Any]).map { $0.map { "\($0)" }.joined(separator: ",") } ?? "\(value)" }
        values["model"] = values["model"] ?? current.model
        let parameters = try PredictParameters(values, base: current.configuration)
        return (try models.model(named: parameters.model), parameters)
    }

    /// `GET /v1/stream`: each binary message is a frame, each answer a text message with its
    /// results (or `{"error": …}`), in order; with `tracker`, boxes carry the connection's track IDs.
    /// A text message changes the settings from the next frame on (`streamUpdate`), answered only
    /// when it is refused.
    private func stream(_ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter, query: Hummingbird.Parameters) async throws {
        var (model, parameters, trackerConfiguration) = try streamSettings(query)
        if let name = query["source"], let source = configuration.sources[String(name)] {
            return try await stream(source, model: model, parameters: parameters, tracker: trackerConfiguration, inbound, outbound)
        }
        var tracker = trackerConfiguration.map { ObjectTracker($0) }
        var frame = 0
        for try await message in inbound.messages(maxSize: configuration.maxBody) {
            let answer: Data
            do {
                switch message {
                case let .text(text):
                    (model, parameters) = try streamUpdate(text, over: parameters)
                    continue
                case let .binary(buffer):
                    var (result, _, _) = try await predict { [model, parameters] in
                        Job(image: Data(buffer: buffer), name: nil, model: model, parameters: parameters)
                    }
                    result.frame = frame
                    if tracker != nil { result = try tracker!.update(result) }
                    frame += 1
                    answer = jsonData(result)
                }
            } catch {
                answer = jsonData(["error": ServerError(error).errorDescription ?? "\(error)"])
            }
            try await outbound.writeTextMessage(String(decoding: answer, as: UTF8.self))
        }
    }

    /// `GET /v1/stream?source=NAME`: the server's stream `source` through a session, each frame
    /// sent as a binary JPEG message followed by its results as text; text messages from the
    /// client change the settings (`streamUpdate`). Ends with the source, or when the client leaves.
    private func stream(_ source: String, model: ServedModel, parameters: PredictParameters, tracker: TrackerConfiguration?,
                        _ inbound: WebSocketInboundStream, _ outbound: WebSocketOutboundWriter) async throws {
        let input: YOLOSession.Source = if let camera = YOLOSession.Camera(source: source) {
            .camera(camera)
        } else if source.contains("://"), let url = URL(string: source) {
            .video(url)
        } else {
            .video(URL(fileURLWithPath: source))
        }
        let session = try YOLOSession(model: model.yolo, source: input, tracker: tracker)
        session.configuration = parameters.configuration
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { [maxBody = configuration.maxBody] in
                var parameters = parameters
                for try await message in inbound.messages(maxSize: maxBody) {
                    guard case let .text(text) = message else { continue }
                    if let (_, update) = try? streamUpdate(text, over: parameters) {
                        parameters = update
                        session.configuration = update.configuration
                    }
                }
                session.stop()
            }
            for await result in session.results {
                if let image = result.image { try await outbound.writeBinaryMessage(ByteBuffer(bytes: try image.jpegData())) }
                try await outbound.writeTextMessage(String(decoding: jsonData(result), as: UTF8.self))
            }
            if let error = session.error {
                try await outbound.writeTextMessage(String(decoding: jsonData(["error": ServerError(error).errorDescription ?? "\(error)"]),
                                                          as: UTF8.self))
            }
            group.cancelAll()
        }
    }
}

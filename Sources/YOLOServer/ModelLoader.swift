import Logging
import ServiceLifecycle

/// Loads and warms the models as the server starts, so that `/healthz` answers at once and
/// `/readyz` once they are ready; a model that cannot load stops the server with its error.
struct ModelLoader: Service {
    let models: ServedModels
    let logger: Logger

    func run() async throws {
        let start = ContinuousClock.now
        try await models.load()
        logger.info("models ready", metadata: ["models": .string(models.names.joined(separator: ",")),
                                               "load_ms": .string(String(format: "%.0f", (ContinuousClock.now - start).milliseconds))])
        // A service that returns ends the group: this one waits for the shutdown.
        try? await gracefulShutdown()
    }
}

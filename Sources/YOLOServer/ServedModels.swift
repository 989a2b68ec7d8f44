import Foundation
import Synchronization
import YOLOCore

/// A model the server answers with, under the name clients give (`?model=yolo26n`).
struct ServedModel: Sendable {
    let name: String
    let yolo: YOLO

    /// The name of a model given as a name, path or URL: its file name without extension.
    static func name(of model: String) -> String {
        let file = model.split(separator: "/").last.map(String.init) ?? model
        for suffix in [".safetensors", ".pt"] where file.hasSuffix(suffix) { return String(file.dropLast(suffix.count)) }
        return file
    }
}

/// The models of a server, loaded and warmed up once (`load`); `/readyz` answers 200 from then on.
/// Tests share one set between servers to load the weights once.
public final class ServedModels: Sendable {
    /// The names requests give, in order.
    package let names: [String]
    private let sources: [String]
    private let store: ModelStore?
    private let loaded = Mutex<[ServedModel]?>(nil)

    /// Models by name or path, as `YOLO(_:)` takes them; the first is the default.
    public init(_ models: [String], store: ModelStore? = nil) {
        sources = models
        names = models.map(ServedModel.name(of:))
        self.store = store
    }

    /// Whether every model is loaded and has run once.
    public var isReady: Bool { loaded.withLock { $0 != nil } }

    /// Loads each model and runs it once on a gray image, so that the first request finds its
    /// workspace planned; a second call does nothing.
    public func load() async throws {
        guard !isReady else { return }
        var models = [ServedModel]()
        for (name, source) in zip(names, sources) {
            let yolo = try await YOLO(source, store: store)
            _ = try await yolo.predict(try Image(pixels: [UInt8](repeating: 114, count: 640 * 480 * 3), width: 640, height: 480, format: .rgb))
            models.append(ServedModel(name: name, yolo: yolo))
        }
        loaded.withLock { $0 = models }
    }

    /// The model named `name` (nil: the first), or `ServerError.unknownModel`.
    func model(named name: String?) throws -> ServedModel {
        let models = loaded.withLock { $0 } ?? []
        guard let name else { return models[0] }
        let wanted = ServedModel.name(of: name)
        guard let model = models.first(where: { $0.name == wanted }) else { throw ServerError.unknownModel(name: name, served: names) }
        return model
    }

    /// `GET /v1/models`: one entry per model.
    var descriptions: [ModelDescription] {
        (loaded.withLock { $0 } ?? []).map {
            ModelDescription(name: $0.name, task: $0.yolo.task.rawValue, names: $0.yolo.names, imgsz: $0.yolo.imageSize)
        }
    }
}

/// A model as `GET /v1/models` lists it.
struct ModelDescription: Codable, Sendable {
    let name: String, task: String, names: [String], imgsz: Int
}

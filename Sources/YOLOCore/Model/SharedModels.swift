import Synchronization

/// The models `YOLO.shared` has loaded, by name and precision: a load in flight is a task every
/// caller awaits, so each model loads once however many ask at the same time.
private let sharedModels = Mutex<[SharedModelKey: Task<YOLO, any Error>]>([:])

private struct SharedModelKey: Hashable {
    let name: String
    let precision: YOLOPrecision
}

extension YOLO {
    /// The model `nameOrPath` names (as `init(_:task:store:configuration:precision:)` reads it, from
    /// `ModelStore.fromEnvironment()`), loaded on first use and kept in memory for the process:
    /// concurrent callers await the same load, later ones get the same instance at once, so
    /// switching between cached models costs nothing. A failed load is not kept (the next call
    /// tries again). The instance is shared: its `configuration` is everyone's; a session's
    /// `configuration` is the place for settings of one's own.
    ///
    /// ```swift
    /// session.model = try await YOLO.shared("yolo26n-seg")    // hot swap
    /// YOLO.evict("yolo26n")                                   // frees it once unused
    /// ```
    public static func shared(_ nameOrPath: String, precision: YOLOPrecision = .fp32) async throws -> YOLO {
        let key = SharedModelKey(name: nameOrPath, precision: precision)
        let load = sharedModels.withLock { models in
            if let load = models[key] { return load }
            let load = Task { try await YOLO(nameOrPath, precision: precision) }
            models[key] = load
            return load
        }
        do {
            return try await load.value
        } catch {
            sharedModels.withLock { models in
                if models[key] == load { models[key] = nil }
            }
            throw error
        }
    }

    /// Drops `nameOrPath` (every precision) from the models `shared` keeps; its memory is freed
    /// when the last holder (a session, a caller) lets it go.
    public static func evict(_ nameOrPath: String) {
        sharedModels.withLock { models in
            for key in models.keys where key.name == nameOrPath { models[key] = nil }
        }
    }
}

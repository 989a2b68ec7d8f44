import Foundation
import Synchronization

/// Threads of their own for predictions and validation: a pass is 50–100 ms of blocking work, and
/// on one of Swift's cooperative threads (one per core) it would starve a server's or an app's
/// other tasks. At most one job per core runs at once (more would only share the cores and each
/// hold a workspace); the others wait in order. Threads start as jobs need them and then stay.
package final class InferenceExecutor: Sendable {
    package static let shared = InferenceExecutor(width: ProcessInfo.processInfo.activeProcessorCount)

    private struct State {
        var jobs: [@Sendable () -> Void] = []
        var threads = 0
    }

    private let width: Int
    private let state = Mutex(State())
    private let pending = DispatchSemaphore(value: 0)

    package init(width: Int) { self.width = max(1, width) }

    /// Runs `work` on one of the executor's threads. Cancelling the calling task sets the flag
    /// `work` receives (a pass checks it between layers) and ends with `CancellationError`.
    package func run<T: Sendable>(_ work: @escaping @Sendable (Cancellation) throws -> T) async throws -> T {
        try Task.checkCancellation()
        let cancellation = Cancellation()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                submit { continuation.resume(with: Result { try cancellation.check(); return try work(cancellation) }) }
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    private func submit(_ job: @escaping @Sendable () -> Void) {
        let spawn = state.withLock { s in
            s.jobs.append(job)
            guard s.threads < width else { return false }
            s.threads += 1
            return true
        }
        if spawn {
            Thread { [self] in
                Thread.current.name = "yolo-inference"
                while true {
                    pending.wait()
                    state.withLock { $0.jobs.removeFirst() }()
                }
            }.start()
        }
        pending.signal()
    }
}

/// Set when the task that started a job is cancelled; the job checks it at its safe points.
package final class Cancellation: Sendable {
    private let cancelled = Atomic(false)

    package func cancel() { cancelled.store(true, ordering: .relaxed) }

    package var isCancelled: Bool { cancelled.load(ordering: .relaxed) }

    /// Throws `CancellationError` once cancelled.
    package func check() throws { if isCancelled { throw CancellationError() } }
}

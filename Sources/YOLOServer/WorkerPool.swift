import Foundation
import Synchronization
import YOLOCore

/// Inference slots behind a bounded queue: at most `workers` predictions run at once (each on
/// threads of its own, never Swift's cooperative pool), at most `queue` more wait in order, and
/// any further request is refused at once (`ServerError.queueFull`, 429) rather than held.
final class WorkerPool: Sendable {
    /// How long a job waited for a slot and how long it ran.
    struct Timings: Sendable {
        var queue: Duration, run: Duration

        /// The `Server-Timing` header's value.
        var header: String { String(format: "queue;dur=%.1f, inference;dur=%.1f", queue.milliseconds, run.milliseconds) }
    }

    let workers: Int, queue: Int
    private let executor: InferenceExecutor
    private let metrics: ServerMetrics
    /// Jobs admitted (running or waiting) and running.
    private let counts = Mutex((admitted: 0, running: 0))

    init(workers: Int, queue: Int, metrics: ServerMetrics) {
        (self.workers, self.queue, self.metrics) = (workers, queue, metrics)
        executor = InferenceExecutor(width: workers)
    }

    /// Reads a request's input with `read`, then runs `work` on it in a slot. A request is
    /// admitted before its input is read, so at most `workers + queue` inputs are held at once,
    /// and one refused (`ServerError.queueFull` when every slot is taken and `queue` jobs already
    /// wait) costs no read. Cancelling the caller (a closed connection) stops its pass.
    func run<Input: Sendable, T: Sendable>(reading read: () async throws -> Input,
                                           _ work: @escaping @Sendable (Input, Cancellation) throws -> T) async throws -> (T, Timings) {
        let admitted = counts.withLock { c in
            guard c.admitted < workers + queue else { return false }
            c.admitted += 1
            return true
        }
        guard admitted else { throw ServerError.queueFull(queue: queue, retryAfter: 1) }
        publish()
        defer {
            counts.withLock { $0.admitted -= 1 }
            publish()
        }
        let input = try await read()
        let queued = ContinuousClock.now
        return try await executor.run { [self] cancellation in
            let started = ContinuousClock.now
            counts.withLock { $0.running += 1 }
            publish()
            defer {
                counts.withLock { $0.running -= 1 }
                publish()
            }
            let value = try work(input, cancellation)
            let timings = Timings(queue: started - queued, run: ContinuousClock.now - started)
            metrics.queueWait.recordNanoseconds(timings.queue.nanoseconds)
            metrics.inference.recordNanoseconds(timings.run.nanoseconds)
            return (value, timings)
        }
    }

    /// Sets the gauges under the counts' lock: read outside it, a stale pair could land last
    /// and leave a gauge wrong (one job's start overwritten by another's admission).
    private func publish() {
        counts.withLock { c in
            metrics.inFlight.set(c.running)
            metrics.queued.set(c.admitted - c.running)
        }
    }
}

extension Duration {
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
    }

    var milliseconds: Double { Double(nanoseconds) / 1e6 }
}

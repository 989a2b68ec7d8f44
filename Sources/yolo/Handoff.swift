import Synchronization
import YOLOCore

/// The results of several sessions handed to the one writer of a run, one at a time: a source's
/// task waits in `put` until its result is taken, so memory holds a result per source. Unlike
/// an `AsyncStream`, `next()` ignores cancellation and returns nil only once every source has
/// ended, so no source is left waiting.
final class Handoff: Sendable {
    private struct State {
        var waiting: [(source: Int, result: Results, taken: CheckedContinuation<Void, Never>)] = []
        var consumer: CheckedContinuation<(source: Int, result: Results)?, Never>?
        var running: Int
    }

    private let state: Mutex<State>

    init(sources: Int) { state = Mutex(State(running: sources)) }

    /// Hands over `result` of source `source` and waits until it is taken.
    func put(_ result: Results, from source: Int) async {
        await withCheckedContinuation { (taken: CheckedContinuation<Void, Never>) in
            state.withLock { s in
                if let consumer = s.consumer {
                    s.consumer = nil
                    consumer.resume(returning: (source, result))
                    taken.resume()
                } else {
                    s.waiting.append((source, result, taken))
                }
            }
        }
    }

    /// A source has no more results.
    func end() {
        state.withLock { s in
            s.running -= 1
            if s.running == 0, s.waiting.isEmpty, let consumer = s.consumer {
                s.consumer = nil
                consumer.resume(returning: nil)
            }
        }
    }

    /// The next result handed over, oldest first; nil once every source has ended.
    func next() async -> (source: Int, result: Results)? {
        await withCheckedContinuation { (c: CheckedContinuation<(source: Int, result: Results)?, Never>) in
            state.withLock { s in
                if !s.waiting.isEmpty {
                    let first = s.waiting.removeFirst()
                    first.taken.resume()
                    c.resume(returning: (first.source, first.result))
                } else if s.running == 0 {
                    c.resume(returning: nil)
                } else {
                    s.consumer = c
                }
            }
        }
    }
}

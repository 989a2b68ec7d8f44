import Dispatch
import Foundation
import Synchronization

/// How a session treats a live source (a stream URL or a camera) that ends, fails or stalls: it
/// is reopened at once, then after 0.5 s, 1 s, 2 s, … (at most 8 s) between attempts, until it
/// answers or `attempts` attempts in a row have failed. Frame numbers go on counting across
/// reconnections. Ultralytics reopens a lost stream once, without waiting; a camera that reboots
/// takes longer.
public struct ReconnectPolicy: Sendable {
    /// Failed attempts in a row before the session ends with `SourceError.reconnectFailed`; 0
    /// ends it at the first loss, with the loss's error (none when the source just ended).
    public var attempts: Int
    /// Seconds without a byte after which a live source has stalled (it is then reopened), and
    /// that any source may take to deliver its first frame.
    public var timeout: Double
    /// Called after each reconnection, on the session's reader thread.
    public var onReconnect: (@Sendable (Reconnection) -> Void)?

    public init(attempts: Int = 5, timeout: Double = 10, onReconnect: (@Sendable (Reconnection) -> Void)? = nil) {
        self.attempts = attempts
        self.timeout = timeout
        self.onReconnect = onReconnect
    }

    /// Seconds to wait before attempt `n` (0-based) to reopen.
    package static func delay(before n: Int) -> Double { n == 0 ? 0 : min(0.5 * Double(1 << min(n - 1, 8)), 8) }

    func validate() throws {
        guard attempts >= 0 else {
            throw YOLOError.invalidConfiguration(field: "reconnect attempts", value: "\(attempts)", reason: "must be 0 or more")
        }
        guard timeout >= 0.001, timeout <= 3600 else {
            throw YOLOError.invalidConfiguration(field: "stream timeout", value: "\(timeout)", reason: "must be in [0.001, 3600] seconds")
        }
    }
}

/// A live source reopened: `source` was away `outage` seconds, lost to `reason`.
public struct Reconnection: Sendable {
    public let source: String
    public let outage: Double
    public let reason: String
}

/// A video read by successive ffmpeg processes: one for a file; for a live source, a new one
/// after each loss, as `policy` allows.
final class VideoFeed: Sendable {
    let input: VideoInput
    let policy: ReconnectPolicy
    /// The first decoder: its frame count and rate are the session's.
    let first: VideoDecoder
    private let state: Mutex<(decoder: VideoDecoder, stopped: Bool, reconnects: Int)>

    /// Opens `input` (see `VideoDecoder.init`); cancelling the current task stops the opening.
    init(_ input: VideoInput, policy: ReconnectPolicy) throws {
        self.input = input
        self.policy = policy
        first = try VideoDecoder(input, timeout: policy.timeout, stopped: { Task.isCancelled })
        state = Mutex((decoder: first, stopped: false, reconnects: 0))
    }

    var reconnects: Int { state.withLock { $0.reconnects } }

    /// Stops the ffmpeg reading now, and any reconnection.
    func terminate() {
        let decoder = state.withLock { s in
            s.stopped = true
            return s.decoder
        }
        decoder.terminate()
    }

    /// Reads every frame into `queue`, numbered from 0 across reconnections, then finishes it
    /// with the error the source ended with.
    func produce(into queue: FrameQueue, name: String) async {
        var decoder = first, index = 0
        while true {
            var read = 0, failure: (any Error)?
            do {
                while let image = try await offload({ [decoder, index] in try decoder.reader.next(index: index) }) {
                    guard await queue.put(Frame(index: index, image: image, name: name)) else { return decoder.terminate() }
                    index += 1
                    read += 1
                }
                try await offload { [decoder, read] in try decoder.finish(frames: read) }
            } catch {
                failure = error
            }
            decoder.terminate()
            if queue.isClosed { return }
            guard input.isLive, policy.attempts > 0 else { return queue.finish(failure) }
            guard let next = await reopen(lostTo: failure.map { ($0 as? LocalizedError)?.errorDescription ?? "\($0)" } ?? "the stream ended",
                                          queue: queue) else { return }
            decoder = next
        }
    }

    /// A new decoder after a loss, as `policy` allows; nil when stopped, or when every attempt
    /// failed (`queue` is then finished with `SourceError.reconnectFailed`).
    private func reopen(lostTo reason: String, queue: FrameQueue) async -> VideoDecoder? {
        let lost = Date()
        var last = reason
        for attempt in 0..<policy.attempts {
            let wake = lost.addingTimeInterval((0...attempt).map(ReconnectPolicy.delay).reduce(0, +))
            while Date() < wake {
                if queue.isClosed { return nil }
                try? await Task.sleep(for: .milliseconds(20))
            }
            do {
                let decoder = try await offload { [input, policy] in
                    try VideoDecoder(input, timeout: policy.timeout, stopped: { queue.isClosed })
                }
                let installed = state.withLock { s in
                    guard !s.stopped else { return false }
                    s.decoder = decoder
                    s.reconnects += 1
                    return true
                }
                guard installed else {
                    decoder.terminate()
                    return nil
                }
                policy.onReconnect?(Reconnection(source: input.source, outage: Date().timeIntervalSince(lost), reason: reason))
                return decoder
            } catch {
                if queue.isClosed { return nil }
                last = (error as? LocalizedError)?.errorDescription ?? "\(error)"
            }
        }
        queue.finish(SourceError.reconnectFailed(source: input.source, attempts: policy.attempts, reason: last))
        return nil
    }
}

/// Runs blocking reads and decoding on a Dispatch thread, not one of the concurrency pool's.
func offload<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async { continuation.resume(with: Result { try work() }) }
    }
}

import Foundation
import Synchronization

/// A live MPEG-TS broadcast over HTTP on 127.0.0.1 (a free port), at a URL without extension as
/// network cameras serve them. One viewer at a time gets the stream from where the broadcast is,
/// paced at `speed` × real time; the broadcast waits while nobody watches. `cut(at:for:)` drops
/// the viewer at a point and answers 503 for a while; at its last byte the broadcast ends for
/// good (503 from then on). A viewer gets the body 100 ms after the headers, unless it hung up
/// by then. `close()` stops the server.
public final class Broadcast: Sendable {
    public let url: URL
    private let listener: Int32
    private let data: [UInt8]
    /// Bytes per second.
    private let rate: Double

    private struct State {
        var position = 0
        var cut: (at: Int, seconds: Double)?
        var refusedUntil = Date.distantPast
        var endedAt: Date?
        var closed = false
    }

    private let state = Mutex(State())
    private let stopped = DispatchSemaphore(value: 0)

    /// Serves `file` (MPEG-TS lasting `duration` seconds at real time).
    public init(_ file: URL, duration: Double, speed: Double = 1) throws {
        data = [UInt8](try Data(contentsOf: file))
        rate = Double(data.count) / duration * speed
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        guard bound, listen(fd, 16) == 0 else {
            Glibc.close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        listener = fd
        url = URL(string: "http://127.0.0.1:\(UInt16(bigEndian: address.sin_port))/live")!
        Thread.detachNewThread { [self] in
            serve()
            stopped.signal()
        }
    }

    /// At byte offset `fraction` of the stream, drops the viewer and refuses viewers for `seconds`.
    public func cut(at fraction: Double, for seconds: Double) {
        state.withLock { $0.cut = (Int(Double(data.count) * fraction) / 188 * 188, seconds) }
    }

    /// When the last byte went out, once it has.
    public var endedAt: Date? { state.withLock { $0.endedAt } }

    /// Stops serving and waits for the server's thread.
    public func close() {
        let wasClosed = state.withLock { s in
            defer { s.closed = true }
            return s.closed
        }
        guard !wasClosed else { return }
        stopped.wait()
        Glibc.close(listener)
    }

    private func serve() {
        while !state.withLock({ $0.closed }) {
            var ready = pollfd(fd: listener, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 50) > 0 else { continue }
            let viewer = accept(listener, nil, nil)
            guard viewer >= 0 else { continue }
            watch(viewer)
            Glibc.close(viewer)
        }
    }

    private func watch(_ viewer: Int32) {
        // The request, up to its blank line.
        var request = [UInt8](), byte: UInt8 = 0
        while request.count < 8192, read(viewer, &byte, 1) == 1 {
            request.append(byte)
            if request.suffix(4) == [13, 10, 13, 10] { break }
        }
        let refused = state.withLock { $0.endedAt != nil || Date() < $0.refusedUntil }
        guard !refused else {
            send(viewer, Array("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".utf8))
            return
        }
        guard send(viewer, Array("HTTP/1.1 200 OK\r\nContent-Type: video/mp2t\r\nConnection: close\r\n\r\n".utf8)) else { return }
        // A client that hangs up at the headers (asking what the URL serves) takes no byte
        // (POLLRDHUP, 0x2000, which Glibc's module does not export).
        var hangUp = pollfd(fd: viewer, events: 0x2000, revents: 0)
        if poll(&hangUp, 1, 100) > 0 { return }
        let start = Date(), from = state.withLock { $0.position }
        while !state.withLock({ $0.closed }) {
            let (position, cut) = state.withLock { ($0.position, $0.cut) }
            if let cut, position >= cut.at {
                state.withLock { s in
                    s.cut = nil
                    s.refusedUntil = Date().addingTimeInterval(cut.seconds)
                }
                return
            }
            guard position < data.count else {
                state.withLock { $0.endedAt = Date() }
                return
            }
            let end = min(data.count, position + 188 * 20, cut.map { max($0.at, position + 188) } ?? .max)
            let due = Double(end - from) / rate - Date().timeIntervalSince(start)
            if due > 0 { usleep(UInt32(due * 1e6)) }
            guard send(viewer, Array(data[position..<end])) else { return }
            state.withLock { $0.position = end }
        }
    }

    /// Writes all of `bytes`; false once the viewer has gone.
    @discardableResult
    private func send(_ viewer: Int32, _ bytes: [UInt8]) -> Bool {
        var sent = 0
        while sent < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.send(viewer, $0.baseAddress! + sent, bytes.count - sent, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return false }
            sent += n
        }
        return true
    }
}

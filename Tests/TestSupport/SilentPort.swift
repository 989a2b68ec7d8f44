import Foundation

/// A socket on 127.0.0.1 that never says anything: a TCP listener whose connections complete in
/// the kernel's backlog, or, `closed`, a port bound and released again (TCP: connections are
/// refused; UDP, always closed: a reader binds it and nobody sends to it).
public final class SilentPort {
    public let port: UInt16
    /// The listener, or -1 when closed.
    public let fd: Int32

    public init(udp: Bool = false, closed: Bool = false) throws {
        let fd = socket(AF_INET, Int32(udp ? SOCK_DGRAM.rawValue : SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
        }
        let closed = udp || closed
        guard bound, closed || listen(fd, 16) == 0 else {
            close(fd)
            throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
        }
        port = UInt16(bigEndian: address.sin_port)
        if closed { close(fd) }
        self.fd = closed ? -1 : fd
    }

    deinit { if fd >= 0 { close(fd) } }
}

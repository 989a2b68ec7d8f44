import Foundation

/// Runs `python3 arguments(port)`, a throwaway server, on a port the kernel has just handed out
/// and waits (at most 10 s) until it accepts connections on 127.0.0.1 (a TCP connect: Foundation
/// reads http URLs only with FoundationNetworking, which YOLOCore does not link). A server that
/// exits instead (another process took the port meanwhile) is started again on a new port, up to
/// 5 times. The caller terminates the process.
public func startPythonServer(_ arguments: (Int) -> [String]) throws -> (Process, Int) {
    for _ in 0..<5 {
        let port = Int(try SilentPort(closed: true).port)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + arguments(port)
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        var tries = 0
        while !isListening(port), process.isRunning, tries < 100 {
            usleep(100_000)
            tries += 1
        }
        if isListening(port) { return (process, port) }
        process.terminate()
        process.waitUntilExit()
    }
    throw NSError(domain: "PythonServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "the test HTTP server did not start"])
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
public func isListening(_ port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

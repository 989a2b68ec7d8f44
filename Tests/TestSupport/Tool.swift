import Foundation

/// Runs a tool found on PATH (`ffmpeg`, `ffprobe`, `python3`) to its end: its status
/// and standard output, with its standard error too when `stderr` is true (else dropped).
public func runTool(_ arguments: [String], stderr: Bool = false) throws -> (status: Int32, output: String) {
    let process = Process(), pipe = Pipe()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = arguments
    process.standardOutput = pipe
    process.standardError = stderr ? pipe : FileHandle.nullDevice
    try process.run()
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: output, as: UTF8.self))
}

/// `runTool` from async code, on a thread of its own: a blocking wait holds no thread of the
/// cooperative pool.
public func runToolAsync(_ arguments: [String], stderr: Bool = false) async throws -> (status: Int32, output: String) {
    try await withCheckedThrowingContinuation { done in
        Thread { done.resume(with: Result { try runTool(arguments, stderr: stderr) }) }.start()
    }
}

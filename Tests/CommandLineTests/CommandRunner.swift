import Foundation
import XCTest

struct CommandResult {
    let status: Int32, stdout: String, stderr: String
}

/// A missing executable or test data fails the test, as in the other test targets.
struct MissingTestInput: Error, CustomStringConvertible {
    let description: String
}

/// Runs a built executable as a user would, in `directory`, with `environment` added to ours
/// and `stdin`'s bytes, if given, on its standard input.
func runCommand(_ executable: URL, _ arguments: [String], in directory: URL,
                environment: [String: String], stdin: URL? = nil) throws -> CommandResult {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    if let stdin { process.standardInput = try FileHandle(forReadingFrom: stdin) }
    // Files rather than pipes: a full pipe would block the child while we wait for it.
    let out = directory.appendingPathComponent("stdout"), err = directory.appendingPathComponent("stderr")
    try Data().write(to: out)
    try Data().write(to: err)
    process.standardOutput = try FileHandle(forWritingTo: out)
    process.standardError = try FileHandle(forWritingTo: err)
    try process.run()
    process.waitUntilExit()
    return CommandResult(status: process.terminationStatus, stdout: try String(contentsOf: out, encoding: .utf8),
                         stderr: try String(contentsOf: err, encoding: .utf8))
}

/// Runs `executable` as `runCommand` does (output discarded) and returns its exit status and
/// peak resident memory in bytes (VmHWM, read from /proc every 10 ms until it exits).
func runMeasuringPeak(_ executable: URL, _ arguments: [String], in directory: URL,
                      environment: [String: String]) throws -> (status: Int32, peakBytes: Int) {
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = directory
    process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    var peak = 0
    while process.isRunning {
        if let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kilobytes = Int(line.split(separator: " ").dropFirst().first ?? "") {
            peak = max(peak, kilobytes << 10)
        }
        usleep(10_000)
    }
    process.waitUntilExit()
    return (process.terminationStatus, peak)
}

/// A test of one built executable, run in a fresh scratch directory.
class CommandTestCase: XCTestCase {
    class var executableName: String { fatalError("subclasses name their executable") }

    /// The executable sits beside the test bundle in the build products directory.
    var executable: URL { Bundle.main.bundleURL.appendingPathComponent(Self.executableName) }
    var scratch: URL!

    override func setUpWithError() throws {
        guard FileManager.default.isExecutableFile(atPath: executable.path) else {
            throw MissingTestInput(description: "no \(Self.executableName) executable at \(executable.path); `swift test` builds it")
        }
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("\(Self.executableName)-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: scratch)
    }
}

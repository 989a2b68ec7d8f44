import Foundation
import XCTest

struct CommandResult {
    let status: Int32, stdout: String, stderr: String
}

/// A missing executable or test data, or a command that hangs, fails the test, as in the other
/// test targets.
struct MissingTestInput: Error, CustomStringConvertible {
    let description: String
}

/// Runs a built executable as a user would, in `directory`, with `environment` added to ours
/// and `stdin`'s bytes, if given, on its standard input.
func runCommand(_ executable: URL, _ arguments: [String], in directory: URL,
                environment: [String: String], stdin: URL? = nil) throws -> CommandResult {
    try RunningCommand(executable, arguments, in: directory, environment: environment, stdin: stdin.map { .file($0) }).wait()
}

/// A built executable started as a user would start it, in `directory`, with `environment`
/// added to ours; `wait()` collects its status and output.
final class RunningCommand {
    enum Input {
        /// The file's bytes.
        case file(URL)
        /// A pipe the test writes to (`input`).
        case pipe
    }

    let process = Process()
    /// The write end of the standard input, for `.pipe`.
    let input: FileHandle?
    private let out: URL, err: URL

    init(_ executable: URL, _ arguments: [String], in directory: URL, environment: [String: String], stdin: Input? = nil) throws {
        process.executableURL = executable
        process.arguments = arguments
        process.currentDirectoryURL = directory
        process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        switch stdin {
        case let .file(url):
            process.standardInput = try FileHandle(forReadingFrom: url)
            input = nil
        case .pipe:
            let pipe = Pipe()
            process.standardInput = pipe
            input = pipe.fileHandleForWriting
        case nil:
            input = nil
        }
        // Files rather than pipes: a full pipe would block the child while we wait for it.
        out = directory.appendingPathComponent("stdout")
        err = directory.appendingPathComponent("stderr")
        try Data().write(to: out)
        try Data().write(to: err)
        process.standardOutput = try FileHandle(forWritingTo: out)
        process.standardError = try FileHandle(forWritingTo: err)
        try process.run()
    }

    /// Waits for the exit; a command still running after `timeout` seconds is killed and fails
    /// the test, which would otherwise hang.
    func wait(timeout: Double = 300) throws -> CommandResult {
        let deadline = Date().addingTimeInterval(timeout)
        while process.isRunning && Date() < deadline { usleep(10_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw MissingTestInput(description: "\(process.arguments ?? []) still ran after \(timeout) s")
        }
        process.waitUntilExit()
        // A build without CPU flags warns first (CPU.slowBuildWarning); the tests check what follows.
        let stderr = try String(contentsOf: err, encoding: .utf8)
            .replacing(/^WARNING: yolo-swift was built without AVX2 and FMA[^\n]*\n/, with: "")
        return CommandResult(status: process.terminationStatus, stdout: try String(contentsOf: out, encoding: .utf8),
                             stderr: stderr)
    }

    /// The process IDs of its children now (/proc/<pid>/task/<tid>/children).
    func children() -> [Int32] {
        let task = "/proc/\(process.processIdentifier)/task"
        return ((try? FileManager.default.contentsOfDirectory(atPath: task)) ?? []).flatMap { thread in
            ((try? String(contentsOfFile: "\(task)/\(thread)/children", encoding: .utf8)) ?? "").split(separator: " ").compactMap { Int32($0) }
        }
    }
}

/// Whether process `pid` exists and has not exited (a zombie has).
func isRunning(_ pid: Int32) -> Bool {
    guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
          let state = stat.split(separator: ")").last?.split(separator: " ").first else { return false }
    return state != "Z" && state != "X"
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

import Foundation
import TestSupport
import XCTest

/// Where `yolo` writes: run folders, exported and dumped files, and the environment it reads.
final class OutputPathCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String], in directory: URL? = nil, environment: [String: String] = [:]) throws -> CommandResult {
        let weights = try weightsDirectory()
        return try runCommand(executable, arguments, in: directory ?? scratch,
                              environment: ["YOLO_WEIGHTS_DIR": weights.path, "YOLO_CACHE_DIR": scratch.path].merging(environment) { $1 })
    }

    private func predictSaving(project: String, in directory: URL) throws -> CommandResult {
        try yolo(["predict", "--source", try sharedFile("images/bus.jpg").path, "--imgsz", "160", "--save", "--quiet",
                  "--project", project], in: directory)
    }

    /// The project path is resolved once, as Ultralytics 8.4.190's `get_save_dir` places it (the
    /// folders below are its answers for the same projects): an absolute one as it is, a
    /// relative one inside runs/detect, where `.`, `./x`, `../x` and `x/./y` go where the shell
    /// would take them from there, and nowhere else.
    func testProjectPathsResolveAsUltralyticsPlacesThem() throws {
        let work = scratch.appendingPathComponent("work")
        try FileManager.default.createDirectory(at: work, withIntermediateDirectories: true)
        for (project, folder) in [(scratch.path + "/abs/", "abs/predict"), (".", "work/runs/detect/predict"),
                                  ("./x", "work/runs/detect/x/predict"), ("../up", "work/runs/up/predict"),
                                  ("x/./y", "work/runs/detect/x/y/predict"), (".", "work/runs/detect/predict-2")] {
            let result = try predictSaving(project: project, in: work)
            XCTAssertEqual(result.status, 0, "\(project): \(result.stderr)")
            let saved = scratch.appendingPathComponent(folder + "/bus.jpg")
            XCTAssertTrue(FileManager.default.fileExists(atPath: saved.path), "\(project): no \(saved.path)")
            XCTAssertTrue(result.stdout.hasSuffix("Results saved to \(scratch.appendingPathComponent(folder).path)\n"), result.stdout)
        }
        let made = try FileManager.default.subpathsOfDirectory(atPath: scratch.path).filter { !$0.hasSuffix(".jpg") }.sorted()
        XCTAssertEqual(made, ["abs", "abs/predict", "work", "work/runs", "work/runs/detect", "work/runs/detect/predict",
                              "work/runs/detect/predict-2", "work/runs/detect/x", "work/runs/detect/x/predict", "work/runs/detect/x/y",
                              "work/runs/detect/x/y/predict", "work/runs/up", "work/runs/up/predict", "work/stderr", "work/stdout"])
        let badName = try yolo(["predict", "--source", try sharedFile("images/bus.jpg").path, "--save", "--name", "a/b"])
        XCTAssertEqual(badName.status, 1)
        XCTAssertEqual(badName.stderr, "Error: --name 'a/b' must be a folder name, without '/'\n")
    }

    /// Runs started together into one project each get a folder of their own.
    func testConcurrentRunsGetFoldersOfTheirOwn() throws {
        let bus = try sharedFile("images/bus.jpg").path, weights = try weightsDirectory().path
        let runs = (0..<4).map { i in
            let process = Process()
            process.executableURL = executable
            process.arguments = ["predict", "--source", bus, "--imgsz", "160", "--save", "--quiet", "--project", scratch.path + "/runs"]
            process.currentDirectoryURL = scratch
            process.environment = ProcessInfo.processInfo.environment.merging(["YOLO_WEIGHTS_DIR": weights]) { $1 }
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            return process
        }
        for process in runs { try process.run() }
        for process in runs {
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0)
        }
        let folders = try FileManager.default.contentsOfDirectory(atPath: scratch.appendingPathComponent("runs").path).sorted()
        XCTAssertEqual(folders, ["predict", "predict-2", "predict-3", "predict-4"])
        for folder in folders {
            XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: scratch.appendingPathComponent("runs/" + folder).path),
                           ["bus.jpg"], folder)
        }
    }

    /// `export -o` and `dump --output` onto a FIFO or a directory are refused: writing by rename
    /// would replace a device node or a FIFO with a regular file.
    func testExportAndDumpRefuseNonRegularOutputs() throws {
        let fifo = scratch.appendingPathComponent("fifo")
        XCTAssertEqual(mkfifo(fifo.path, 0o644), 0)
        let weights = try weightsFile("yolo26n.safetensors").path
        for (arguments, output, kind) in [(["export", "--model", weights, "-o", fifo.path], fifo.path, "a FIFO"),
                                          (["export", "--model", weights, "-o", scratch.path], scratch.path, "a directory"),
                                          (["dump", "--model", weights, "--input", weights, "--output", fifo.path], fifo.path, "a FIFO")] {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertEqual(result.stderr, "Error: cannot write \(output): it is \(kind), not a regular file\n")
        }
        var info = stat()
        XCTAssertEqual(stat(fifo.path, &info), 0)
        XCTAssertEqual(info.st_mode & S_IFMT, S_IFIFO, "the FIFO was replaced")
    }

    /// A `YOLO_NUM_THREADS` that is not a thread count is an error, not silently one per core.
    func testBadThreadCountInTheEnvironmentIsAnError() throws {
        let bus = try sharedFile("images/bus.jpg").path
        for value in ["abc", "0", "-2", "100000"] {
            let result = try yolo(["predict", "--source", bus, "--imgsz", "160"], environment: ["YOLO_NUM_THREADS": value])
            XCTAssertEqual(result.status, 1, value)
            XCTAssertEqual(result.stderr, "Error: configuration YOLO_NUM_THREADS = \(value) is invalid: must be an integer in 1…1024\n")
        }
        let good = try yolo(["predict", "--source", bus, "--imgsz", "160", "--quiet"], environment: ["YOLO_NUM_THREADS": "1"])
        XCTAssertEqual(good.status, 0, good.stderr)
    }

    /// A FIFO or /dev/zero as the source is a clear skip or error, not "permission" or a hang.
    func testFIFOAndDeviceSourcesAreNotImages() throws {
        let fifo = scratch.appendingPathComponent("frames.jpg")
        XCTAssertEqual(mkfifo(fifo.path, 0o644), 0)
        for source in [fifo.path, "/dev/zero"] {
            let kind = source == "/dev/zero" ? "a character device" : "a FIFO"
            let result = try yolo(["predict", "--source", source, "--imgsz", "160"])
            XCTAssertEqual(result.status, 1, source)
            XCTAssertEqual(result.stderr, "Error: cannot read \(source): it is \(kind), not an image file\n")
        }
    }
}

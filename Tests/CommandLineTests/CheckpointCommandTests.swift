import Foundation
import TestSupport
import XCTest

/// Ultralytics `.pt` checkpoints on the command line: `yolo predict --model NAME.pt` and `yolo export`.
final class CheckpointCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch, environment: ["YOLO_CACHE_DIR": scratch.path])
    }

    /// `--save-json -` lines without the timings.
    private func predictions(_ model: String, _ image: URL) throws -> [NSDictionary] {
        let result = try yolo(["predict", "--model", model, "--source", image.path, "--save-json", "-"])
        XCTAssertEqual(result.status, 0, result.stderr)
        return try result.stdout.split(separator: "\n").map { line in
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
            return object.filter { $0.key != "speed_ms" } as NSDictionary
        }
    }

    func testPredictFromCheckpointsMatchesSafetensors() throws {
        for (name, image) in [("yolo26n", "bus"), ("yolo26n-seg", "bus"), ("yolo26n-pose", "zidane"), ("yolo26n-obb", "boats"),
                              ("yolo26n-cls", "bus"), ("yolo11n", "zidane")] {
            let weights = try weightsFile(name + ".safetensors")
            let checkpoint = try weightsFile(name + "-w8.pt")
            let source = try sharedFile("images/" + image + ".jpg")
            let expected = try predictions(weights.path, source)
            XCTAssertFalse(expected.isEmpty)
            XCTAssertEqual(try predictions(checkpoint.path, source), expected, name)
        }
    }

    /// The data section of a safetensors file (after the 8-byte length and the JSON header).
    private func dataSection(_ url: URL) throws -> (header: [String: Any], data: Data) {
        let bytes = try Data(contentsOf: url)
        let length = Int(bytes.prefix(8).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
        let header = try XCTUnwrap(JSONSerialization.jsonObject(with: bytes.subdata(in: 8 ..< 8 + length)) as? [String: Any])
        return (header, bytes.subdata(in: 8 + length ..< bytes.count))
    }

    func testExportWritesTheConvertedFile() throws {
        let weights = try weightsFile("yolo26n.safetensors")
        let checkpoint = try weightsFile("yolo26n-w8.pt")
        let half = try yolo(["export", "--model", checkpoint.path, "--format", "safetensors", "--half", "-o", "half.safetensors"])
        XCTAssertEqual(half.status, 0, half.stderr)
        XCTAssertTrue(half.stdout.contains("half.safetensors: detect, 80 classes, "), half.stdout)
        // F16 tensors in name order: the same bytes as the shared file converted by Python.
        let exported = try dataSection(scratch.appendingPathComponent("half.safetensors"))
        XCTAssertEqual(exported.data, try dataSection(weights).data)
        let metadata = try XCTUnwrap(exported.header["__metadata__"] as? [String: String])
        XCTAssertEqual(metadata["format"], "yolo-safetensors/1")
        XCTAssertEqual(metadata["source"], "yolo26n-w8.pt")
        XCTAssertEqual(metadata["task"], "detect")
        XCTAssertEqual(metadata["end2end"], "true")

        // F32 by default, exact: the same predictions.
        let full = try yolo(["export", "--model", checkpoint.path, "-o", "full.safetensors"])
        XCTAssertEqual(full.status, 0, full.stderr)
        let image = try sharedFile("images/bus.jpg")
        XCTAssertEqual(try predictions(scratch.appendingPathComponent("full.safetensors").path, image),
                       try predictions(weights.path, image))

        let onnx = try yolo(["export", "--model", checkpoint.path, "--format", "onnx"])
        XCTAssertNotEqual(onnx.status, 0)
        XCTAssertTrue(onnx.stderr.contains("unknown format 'onnx'; supported: safetensors"), onnx.stderr)
        let itself = try yolo(["export", "--model", "full.safetensors", "-o", "full.safetensors"])
        XCTAssertEqual(itself.status, 1)
        XCTAssertTrue(itself.stderr.contains("is the model itself"), itself.stderr)
    }

    /// A model from the download cache is exported to the current directory, not beside it in
    /// the cache, where the file would count as a second download of the name.
    func testExportOfACachedDownloadGoesToTheCurrentDirectory() throws {
        let cache = scratch.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        // The cache's name for the official asset: 16 hex digits of the SHA-256 of its URL.
        let asset = "47765e118e59dfeb-yolo26n.pt"
        try FileManager.default.createSymbolicLink(at: cache.appendingPathComponent(asset),
                                                   withDestinationURL: try weightsFile("yolo26n-w8.pt"))
        let result = try runCommand(executable, ["export", "--model", "yolo26n", "--half"], in: scratch,
                                    environment: ["YOLO_WEIGHTS_DIR": scratch.path, "YOLO_CACHE_DIR": cache.path, "YOLO_OFFLINE": "1"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("yolo26n.safetensors").path))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: cache.path), [asset])
    }

    /// A bare name finds `NAME.pt` when there is no `NAME.safetensors`.
    func testModelNameFindsCheckpoint() throws {
        let checkpoint = try weightsFile("yolo26n-cls-w8.pt")
        try FileManager.default.createSymbolicLink(at: scratch.appendingPathComponent("mine.pt"), withDestinationURL: checkpoint)
        let result = try runCommand(executable, ["predict", "--model", "mine", "--source", try sharedFile("images/bus.jpg").path],
                                    in: scratch, environment: ["YOLO_WEIGHTS_DIR": scratch.path, "YOLO_CACHE_DIR": scratch.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("minibus"), result.stdout)
    }
}

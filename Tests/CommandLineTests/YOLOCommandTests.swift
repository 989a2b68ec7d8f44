import Foundation
import XCTest

/// `yolo predict` and `yolo dump` run as a user would run them.
final class YOLOCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    func yolo(_ arguments: [String]) throws -> CommandResult {
        let weights = try sharedFile("weights", "yolo26n.safetensors").deletingLastPathComponent()
        return try runCommand(executable, arguments, in: scratch,
                              environment: ["YOLO_WEIGHTS_DIR": weights.path, "YOLO_CACHE_DIR": scratch.path])
    }

    func testPredictPrintsSavesLabelsAndJSON() throws {
        let images = try sharedFile("images", "bus.jpg").deletingLastPathComponent()
        let result = try yolo(["predict", "--model", "yolo26n", "--source", images.path + "/[bz][ui]*.jpg",
                               "--save", "--save-txt", "--save-json", "out.json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("image 1/2 \(images.path)/bus.jpg: 640x480 4 persons, 1 bus, "), result.stdout)
        XCTAssertTrue(result.stdout.contains("image 2/2 \(images.path)/zidane.jpg: 384x640 2 persons, 1 tie, "), result.stdout)
        let run = scratch.appendingPathComponent("runs/predict/exp")
        XCTAssertTrue(FileManager.default.fileExists(atPath: run.appendingPathComponent("bus.jpg").path))
        let labels = try String(contentsOf: run.appendingPathComponent("labels/bus.txt"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: " ") }
        XCTAssertEqual(labels.count, 5)
        XCTAssertTrue(labels.allSatisfy { $0.count == 6 }, "cls cx cy w h conf")
        XCTAssertEqual(labels.map { $0[0] }, ["0", "0", "5", "0", "0"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("out.json")))
            as? [[String: Any]])
        XCTAssertEqual(json.map { $0["image"] as? String }, ["bus.jpg", "zidane.jpg"])
        XCTAssertEqual(json[0]["orig_shape"] as? [Int], [1080, 810])
        XCTAssertEqual((json[0]["boxes"] as? [String: Any])?["cls"] as? [Int], [0, 0, 5, 0, 0])
        // A second run goes to exp2.
        XCTAssertEqual(try yolo(["predict", "--source", images.appendingPathComponent("bus.jpg").path, "--save"]).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("runs/predict/exp2/bus.jpg").path))
    }

    func testBadInputIsAOneLineErrorAndNonZeroExit() throws {
        for arguments in [["predict", "--source", "missing.jpg"],
                          ["predict", "--model", "no-such-model", "--source", "x.jpg"],
                          ["predict", "--source", scratch.path],
                          ["predict", "--source", "x.jpg", "--conf", "2"]] {
            let result = try yolo(arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix("Error: "), "\(arguments): \(result.stderr)")
        }
        try Data("not an image".utf8).write(to: scratch.appendingPathComponent("fake.jpg"))
        let result = try yolo(["predict", "--source", scratch.appendingPathComponent("fake.jpg").path])
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
    }

    func testDumpWritesEveryLayer() throws {
        let input = try sharedFile("reference", "yolo26n/zidane.safetensors")
        let result = try yolo(["dump", "--model", "yolo26n", "--input", input.path, "--output", "layers.safetensors"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("wrote 26 tensors"), result.stdout)
    }
}

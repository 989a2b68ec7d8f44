import Foundation
import TestSupport
import XCTest

/// `yolo val` run as a user would run it.
final class ValCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        let weights = try weightsDirectory()
        return try runCommand(executable, arguments, in: scratch, environment: ["YOLO_WEIGHTS_DIR": weights.path])
    }

    /// coco8.yaml with `path` at the shared copy and only a class count: the table shows the model's names.
    private func coco8YAML() throws -> String {
        let coco8 = try sharedFile("datasets/coco8")
        let yaml = "path: \(coco8.path)\ntrain: images/train\nval: images/val\nnc: 80\n"
        try yaml.write(to: scratch.appendingPathComponent("coco8.yaml"), atomically: true, encoding: .utf8)
        return "coco8.yaml"
    }

    /// The table, speed line, JSON and plots of yolo11n on coco8 val at batch 1, as Ultralytics
    /// 8.4.190 prints the table (see ValidationTests for the reference command).
    func testValPrintsTableSavesJSONAndPlots() throws {
        let result = try yolo(["val", "--model", "yolo11n", "--data", try coco8YAML(), "--batch", "1", "--save-json", "m.json",
                               "--plots"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertTrue(lines.contains("val: val split of coco8.yaml: 4 images, 0 backgrounds, 0 corrupt"), result.stdout)
        // Ultralytics' table, names from the model.
        let table = """
                             Class     Images  Instances      Box(P          R      mAP50  mAP50-95)
                               all          4         17      0.541       0.85      0.801      0.614
                            person          3         10      0.647        0.6      0.581      0.291
                               dog          1          1      0.169          1      0.995      0.796
                             horse          1          2      0.661          1      0.995      0.597
                          elephant          1          2      0.284        0.5      0.247      0.107
                          umbrella          1          1      0.548          1      0.995      0.995
                      potted plant          1          1      0.934          1      0.995      0.895
            """
        XCTAssertTrue(result.stdout.contains(table), result.stdout)
        XCTAssertTrue(lines.contains { $0.hasPrefix("Speed: ") && $0.hasSuffix("ms postprocess per image") }, result.stdout)
        XCTAssertEqual(result.stderr, "", "no progress when stderr is not a terminal")
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("m.json")))
            as? [String: Any])
        let metrics = try XCTUnwrap(json["metrics"] as? [String: Double])
        XCTAssertEqual(Set(metrics.keys), ["P", "R", "mAP50", "mAP50-95"])
        XCTAssertEqual(try XCTUnwrap(metrics["mAP50-95"]), 0.6135571706696862, accuracy: 0.001)
        let perClass = try XCTUnwrap(json["per_class"] as? [[String: Any]])
        XCTAssertEqual(perClass.first?["name"] as? String, "person")
        XCTAssertEqual(perClass.first?["instances"] as? Int, 10)
        XCTAssertNotNil((json["speed_ms"] as? [String: Double])?["inference"])
        let run = scratch.appendingPathComponent("runs/val/exp")
        XCTAssertTrue(result.stdout.contains("Results saved to \(run.path)"), result.stdout)
        for plot in ["BoxPR_curve.png", "confusion_matrix.png", "confusion_matrix_normalized.png"] {
            let bytes = try Data(contentsOf: run.appendingPathComponent(plot))
            XCTAssertEqual(bytes.prefix(4), Data([0x89, 0x50, 0x4E, 0x47]), plot)
        }
    }

    func testUnwritableJSONFailsFirst() throws {
        let result = try yolo(["val", "--model", "yolo11n", "--data", try coco8YAML(), "--save-json", "missing/m.json"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.contains("Error: cannot write --save-json missing/m.json: No such file or directory"), result.stderr)
        XCTAssertFalse(result.stdout.contains("Speed:"), "failed before validating")
    }

    func testYAMLWithoutValIsAnError() throws {
        try "train: images\nnames: [a]\n".write(to: scratch.appendingPathComponent("bad.yaml"), atomically: true, encoding: .utf8)
        let result = try yolo(["val", "--model", "yolo11n", "--data", "bad.yaml"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.hasPrefix("Error: data YAML "), result.stderr)
        XCTAssertTrue(result.stderr.contains("bad.yaml has no 'val:' key; it must give the validation images"), result.stderr)
    }
}

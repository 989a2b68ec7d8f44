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
        let run = scratch.appendingPathComponent("runs/detect/val")
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

    /// Label classes inf and 1e30 and a polygon beside a row without points (each once a trap)
    /// are corrupt labels: the images are skipped with a warning, the rest validated.
    func testHostileLabelsAreSkippedWithWarnings() throws {
        let coco8 = try sharedFile("datasets/coco8")
        let images = scratch.appendingPathComponent("hostile/images"), labels = scratch.appendingPathComponent("hostile/labels")
        for folder in [images, labels] { try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true) }
        let rows = ["good": try String(contentsOf: coco8.appendingPathComponent("labels/val/000000000042.txt"), encoding: .utf8),
                    "inf": "inf 0.5 0.5 0.2 0.2\n", "huge": "1e30 0.5 0.5 0.2 0.2\n", "polygon": "0 0.1 0.1 0.2 0.1 0.2 0.2\n1\n"]
        for (name, text) in rows {
            try FileManager.default.copyItem(at: coco8.appendingPathComponent("images/val/000000000042.jpg"),
                                             to: images.appendingPathComponent("\(name).jpg"))
            try text.write(to: labels.appendingPathComponent("\(name).txt"), atomically: true, encoding: .utf8)
        }
        try "path: hostile\nval: images\nnc: 80\n".write(to: scratch.appendingPathComponent("hostile.yaml"), atomically: true, encoding: .utf8)
        let result = try yolo(["val", "--model", "yolo11n", "--data", "hostile.yaml"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("val: val split of hostile.yaml: 4 images, 0 backgrounds, 3 corrupt"), result.stdout)
        for (name, reason) in [("huge", "Label class 1e+30 exceeds dataset class count 80"), ("inf", "non-integer class labels [inf]"),
                               ("polygon", "a polygon row has a class and no points (line 2)")] {
            XCTAssertTrue(result.stderr.contains("WARNING ⚠️ \(images.path)/\(name).jpg: ignoring corrupt image/label: \(reason)"),
                          result.stderr)
        }
    }

    /// A "billion laughs" data YAML (~600 bytes standing for 387 million strings) fails at once
    /// with a clear error, run within 2 GiB of address space and 60 s of CPU.
    func testAliasBombFailsQuickly() throws {
        let bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
            + zip("abcdefgh", "bcdefghi").map { a, b in "\(b): &\(b) [" + Array(repeating: "*\(a)", count: 9).joined(separator: ", ") + "]\n" }.joined()
            + "val: images\nnames: *i\n"
        try bomb.write(to: scratch.appendingPathComponent("bomb.yaml"), atomically: true, encoding: .utf8)
        let start = Date()
        let result = try runCommand(URL(fileURLWithPath: "/usr/bin/prlimit"),
                                    ["--as=\(2 << 30)", "--cpu=60", executable.path, "val", "--model", "yolo11n", "--data", "bomb.yaml"],
                                    in: scratch, environment: ["YOLO_WEIGHTS_DIR": try weightsDirectory().path])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("bomb.yaml is not valid: its aliases expand it to more than 1000000 nodes"),
                      result.stderr)
        XCTAssertLessThan(Date().timeIntervalSince(start), 10)
    }

    func testYAMLWithoutValIsAnError() throws {
        try "train: images\nnames: [a]\n".write(to: scratch.appendingPathComponent("bad.yaml"), atomically: true, encoding: .utf8)
        let result = try yolo(["val", "--model", "yolo11n", "--data", "bad.yaml"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.hasPrefix("Error: data YAML "), result.stderr)
        XCTAssertTrue(result.stderr.contains("bad.yaml has no 'val:' key; it must give the validation images"), result.stderr)
    }
}

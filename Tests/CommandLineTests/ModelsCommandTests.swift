import Foundation
import TestSupport
import XCTest

/// `yolo models` and `--csv-boxes`, run as a user would.
final class ModelsCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch,
                       environment: ["YOLO_WEIGHTS_DIR": scratch.appendingPathComponent("weights").path,
                                     "YOLO_CACHE_DIR": scratch.appendingPathComponent("cache").path])
    }

    /// The groups in the selector's order, official names with their family, task and size,
    /// local files by path; `--local` keeps those on this machine.
    func testModelsListsGroupsAndLocalFiles() throws {
        let weights = scratch.appendingPathComponent("weights")
        try FileManager.default.createDirectory(at: weights, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: weightsFile("yolo26n"), to: weights.appendingPathComponent("yolo26n.safetensors"))
        try Data("x".utf8).write(to: weights.appendingPathComponent("potholes.pt"))
        let result = try yolo(["models"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.filter { !$0.hasPrefix(" ") }, ["legacy", "YOLOv8 family", "YOLO11/26", "custom"])
        let yolo26n = try XCTUnwrap(lines.first { $0.hasPrefix("  yolo26n ") })
        XCTAssertEqual(yolo26n.split(separator: " ").map(String.init),
                       ["yolo26n", "YOLO26", "detect", "n", weights.appendingPathComponent("yolo26n.safetensors").path])
        XCTAssertTrue(lines.contains { $0.hasPrefix("  yolov8s-pose ") && $0.hasSuffix("YOLOv8  pose  s  (downloaded on first use)") })
        XCTAssertEqual(lines.last?.split(separator: " ").map(String.init),
                       [weights.appendingPathComponent("potholes.pt").path, "custom", "?", "-", weights.appendingPathComponent("potholes.pt").path])

        let local = try yolo(["models", "--local"])
        XCTAssertEqual(local.stdout.split(separator: "\n").filter { !$0.hasPrefix(" ") }, ["YOLO11/26", "custom"])
    }

    /// `--csv-boxes xywh`: centre and size in the CSV's box columns.
    func testCSVBoxesAsCentreAndSize() throws {
        let weights = scratch.appendingPathComponent("weights")
        try FileManager.default.createDirectory(at: weights, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: weightsFile("yolo26n"), to: weights.appendingPathComponent("yolo26n.safetensors"))
        let bus = try sharedFile("images/bus.jpg").path
        for format in ["xyxy", "xywh"] {
            let result = try yolo(["predict", "--model", "yolo26n", "--source", bus, "--save-csv", "\(format).csv", "--csv-boxes", format])
            XCTAssertEqual(result.status, 0, result.stderr)
        }
        func rows(_ file: String) throws -> [[String]] {
            try String(contentsOf: scratch.appendingPathComponent(file), encoding: .utf8).split(separator: "\n")
                .map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
        }
        let corners = try rows("xyxy.csv"), centres = try rows("xywh.csv")
        XCTAssertEqual(centres.first, "image,frame,class,name,conf,x,y,w,h,id,source,time".split(separator: ",").map(String.init))
        XCTAssertEqual(corners.count, centres.count)
        XCTAssertGreaterThan(corners.count, 1)
        for (a, b) in zip(corners.dropFirst(), centres.dropFirst()) {
            let (p, q) = (a[5...8].map { Float($0)! }, b[5...8].map { Float($0)! })
            XCTAssertEqual(q, [(p[0] + p[2]) / 2, (p[1] + p[3]) / 2, p[2] - p[0], p[3] - p[1]])
            XCTAssertEqual(Array(a[..<5]) + Array(a[9...]), Array(b[..<5]) + Array(b[9...]))
        }
    }
}

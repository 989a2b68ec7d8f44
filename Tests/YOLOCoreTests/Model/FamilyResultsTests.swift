import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Final results of the legacy (DFL + NMS) segment and obb heads against Ultralytics 8.4.190's
/// `predict` on bus.jpg at imgsz 128, on family fixtures whose scores have no exact ties
/// (`scripts/make-family-fixtures`, `NAME.results.json`): the same detections in the same order,
/// equal classes, |Δconf| ≤ 0.005, box IoU ≥ 0.99 or rotated corners within 1.5 px, and mask
/// areas within 1 %.
final class FamilyResultsTests: XCTestCase {
    private func check(_ name: String) async throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("family-\(name)-\(getpid()).safetensors")
        try FamilyFixtures.weights(name).write(to: file)
        defer { try? FileManager.default.removeItem(at: file) }
        var configuration = YOLOConfiguration()
        configuration.imageSize = 128
        let result = try await YOLO(contentsOf: file, configuration: configuration).predict(try sharedFile("images/bus.jpg").path)
        let expected = try JSONDecoder().decode(Results.self, from: Data(contentsOf:
            FamilyFixtures.directory.appendingPathComponent(name + ".results.json")))
        XCTAssertEqual(result.inputShape, expected.inputShape, name)
        XCTAssertEqual(result.boxes.map(\.cls), expected.boxes.map(\.cls), name)
        XCTAssertEqual(result.obb.map(\.cls), expected.obb.map(\.cls), name)
        XCTAssertFalse(expected.boxes.isEmpty && expected.obb.isEmpty, "\(name): nothing to compare")
        var worstIoU: Float = 1, worstConf: Float = 0, worstCorner: Float = 0, worstArea = 0.0
        for (a, e) in zip(result.boxes, expected.boxes) {
            let w = max(0, min(a.xyxy[2], e.xyxy[2]) - max(a.xyxy[0], e.xyxy[0]))
            let h = max(0, min(a.xyxy[3], e.xyxy[3]) - max(a.xyxy[1], e.xyxy[1]))
            let area = { (b: [Float]) in (b[2] - b[0]) * (b[3] - b[1]) }
            worstIoU = min(worstIoU, w * h / (area(a.xyxy) + area(e.xyxy) - w * h))
            worstConf = max(worstConf, abs(a.conf - e.conf))
        }
        for (a, e) in zip(result.obb, expected.obb) {
            worstConf = max(worstConf, abs(a.conf - e.conf))
            for (p, q) in zip(a.xyxyxyxy, e.xyxyxyxy) { worstCorner = max(worstCorner, chebyshev(p, q)) }
        }
        XCTAssertEqual(result.masks.count, expected.masks.count, name)
        for (a, e) in zip(result.masks, expected.masks) { worstArea = max(worstArea, abs(Double(a.area) / Double(e.area) - 1)) }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99, name)
        XCTAssertLessThanOrEqual(worstConf, 0.005, name)
        XCTAssertLessThanOrEqual(worstCorner, 1.5, name)
        XCTAssertLessThanOrEqual(worstArea, 0.01, name)
        print("family results \(name): \(result.boxes.count + result.obb.count) detections, min IoU \(worstIoU), "
              + "max |Δconf| \(worstConf), max corner error \(worstCorner) px, max relative mask area error \(worstArea)")
    }

    func testYOLOv8Segment() async throws { try await check("yolov8-seg") }
    func testYOLO11Segment() async throws { try await check("yolo11-seg") }
    func testYOLOv8OBB() async throws { try await check("yolov8-obb") }
}

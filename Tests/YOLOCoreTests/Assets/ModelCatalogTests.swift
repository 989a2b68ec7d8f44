import Foundation
import TestSupport
import XCTest
import YOLOCore

/// `YOLO.availableModels`: the official names by family and group, local files found, custom
/// files listed by path.
final class ModelCatalogTests: XCTestCase {
    func testAvailableModelsOnATemporaryDirectory() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-catalog-\(UUID().uuidString)")
        let weights = root.appendingPathComponent("weights"), cache = root.appendingPathComponent("cache")
        try FileManager.default.createDirectory(at: weights, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        addTeardownBlock { try? FileManager.default.removeItem(at: root) }
        for file in ["yolo26n.safetensors", "best.pt", "helmets-seg.safetensors", "notes.txt", "yolo26n.onnx"] {
            try Data("x".utf8).write(to: weights.appendingPathComponent(file))
        }
        // A download by URL is cached as "<16 hex digits>-<its name>".
        try Data("x".utf8).write(to: cache.appendingPathComponent("0123456789abcdef-potholes.pt"))
        let store = ModelStore(searchDirectories: [weights], cacheDirectory: cache, offline: true)

        let models = try YOLO.availableModels(store: store)
        XCTAssertEqual(models.map(\.group), models.map(\.group).sorted {
            ModelInfo.Group.allCases.firstIndex(of: $0)! < ModelInfo.Group.allCases.firstIndex(of: $1)!
        }, "grouped in the selector's order")
        let official = models.filter { $0.group != .custom }
        XCTAssertEqual(official.count, 3 + 10 + 7 + 6 + 5 + 30 + 25 + 25)
        XCTAssertTrue(official.allSatisfy { ModelStore.isOfficial($0.name) })
        XCTAssertEqual(Set(models.filter { $0.group == .yolo11And26 }.map(\.family)), ["YOLO11", "YOLO26"])
        XCTAssertEqual(Set(models.filter { $0.group == .yolov8 }.map(\.family)), ["YOLOv8"])
        XCTAssertEqual(Set(models.filter { $0.group == .legacy }.map(\.family)), ["YOLOv3u", "YOLOv5u", "YOLOv9", "YOLOv10", "YOLO12"])

        let yolo26n = try XCTUnwrap(models.first { $0.name == "yolo26n" })
        XCTAssertEqual([yolo26n.family, yolo26n.task?.rawValue, yolo26n.size], ["YOLO26", "detect", "n"])
        XCTAssertEqual(yolo26n.group, .yolo11And26)
        XCTAssertEqual(yolo26n.file, weights.appendingPathComponent("yolo26n.safetensors"))
        let seg = try XCTUnwrap(models.first { $0.name == "yolov8m-seg" })
        XCTAssertEqual([seg.family, seg.task?.rawValue, seg.size], ["YOLOv8", "segment", "m"])
        XCTAssertNil(seg.file, "not on this machine")
        XCTAssertEqual(models.filter { $0.file != nil && $0.group != .custom }.map(\.name), ["yolo26n"])

        let custom = models.filter { $0.group == .custom }
        XCTAssertEqual(custom.map(\.name), [weights.appendingPathComponent("best.pt").path,
                                            weights.appendingPathComponent("helmets-seg.safetensors").path,
                                            cache.appendingPathComponent("0123456789abcdef-potholes.pt").path])
        XCTAssertEqual(custom.map(\.task), [nil, .segment, nil])
        XCTAssertTrue(custom.allSatisfy { $0.family == "custom" && $0.size == nil && $0.file?.path == $0.name })
    }
}

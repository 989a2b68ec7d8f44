import Foundation
import XCTest
import YOLOCore

/// Final results against Ultralytics 8.4.190 (`reference/<model>/<image>.json`).
final class PredictTests: XCTestCase {
    private func shared() -> URL {
        ProcessInfo.processInfo.environment["YOLO_SHARED_DIR"].map { URL(fileURLWithPath: $0) }
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("shared")
    }

    private func model(_ name: String) async throws -> YOLO {
        let directory = ProcessInfo.processInfo.environment["YOLO_WEIGHTS_DIR"].map { URL(fileURLWithPath: $0) }
            ?? shared().appendingPathComponent("weights")
        return try YOLO(contentsOf: directory.appendingPathComponent(name + ".safetensors"))
    }

    private func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    }

    /// Same boxes in the same order: equal classes, IoU ≥ 0.99, confidence within 0.005.
    private func check(_ modelName: String, _ image: String) async throws {
        let yolo = try await model(modelName)
        let result = try await yolo.predict(shared().appendingPathComponent("images/\(image).jpg").path)
        let expected = try JSONDecoder().decode(DetectionResult.self, from: Data(contentsOf:
            shared().appendingPathComponent("reference/\(modelName)/\(image).json")))
        XCTAssertEqual(result.originalShape, expected.originalShape)
        XCTAssertEqual(result.inputShape, expected.inputShape)
        XCTAssertEqual(result.boxes.map(\.cls), expected.boxes.map(\.cls), "\(modelName)/\(image) classes")
        var worstIoU: Float = 1, worstConf: Float = 0
        for (a, e) in zip(result.boxes, expected.boxes) {
            worstIoU = min(worstIoU, iou(a.xyxy, e.xyxy))
            worstConf = max(worstConf, abs(a.conf - e.conf))
        }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99, "\(modelName)/\(image)")
        XCTAssertLessThanOrEqual(worstConf, 0.005, "\(modelName)/\(image)")
        print("predict \(modelName)/\(image): \(result.boxes.count) boxes, min IoU \(worstIoU), max |Δconf| \(worstConf)")
    }

    func testYOLO26nBus() async throws { try await check("yolo26n", "bus") }
    func testYOLO26nZidane() async throws { try await check("yolo26n", "zidane") }
    func testYOLO11nBusWithNMS() async throws { try await check("yolo11n", "bus") }
    func testYOLO11nZidaneWithNMS() async throws { try await check("yolo11n", "zidane") }

    /// One model shared by many tasks gives the same results as sequential use.
    func testConcurrentPredictionsMatchSequential() async throws {
        let yolo = try await model("yolo26n")
        let paths = ["bus", "zidane", "bus", "zidane"].map { shared().appendingPathComponent("images/\($0).jpg").path }
        var sequential = [[Box]]()
        for path in paths { sequential.append(try await yolo.predict(path).boxes) }
        let concurrent = try await withThrowingTaskGroup(of: (Int, [Box]).self) { group in
            for (i, path) in paths.enumerated() { group.addTask { (i, try await yolo.predict(path).boxes) } }
            var out = [[Box]](repeating: [], count: paths.count)
            for try await (i, boxes) in group { out[i] = boxes }
            return out
        }
        XCTAssertEqual(concurrent, sequential)
    }

    /// Configuration changes apply from the next prediction on.
    func testConfigurationChangesApplyToTheNextPrediction() async throws {
        let yolo = try await model("yolo26n")
        let bus = shared().appendingPathComponent("images/bus.jpg").path
        let all = try await yolo.predict(bus).boxes
        XCTAssertEqual(all.count, 5)
        yolo.configuration.classes = [5]
        let buses = try await yolo.predict(bus).boxes
        XCTAssertEqual(buses.map(\.name), ["bus"])
        yolo.configuration.classes = nil
        yolo.configuration.confidence = 0.9
        let confident = try await yolo.predict(bus).boxes
        XCTAssertEqual(confident.count, 3)
        yolo.configuration.maxDetections = 0
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected a configuration error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .invalidConfiguration(field: "maxDetections", value: "0", reason: "must be at least 1"))
        }
    }

    func testErrors() async throws {
        do {
            _ = try await YOLO("no-such-model")
            XCTFail("expected modelNotFound")
        } catch let error as YOLOError {
            guard case .modelNotFound(name: "no-such-model", let searched) = error else { return XCTFail("\(error)") }
            XCTAssertFalse(searched.isEmpty)
        }
        let yolo = try await model("yolo26n")
        do {
            _ = try await yolo.predict("/nonexistent/image.jpg")
            XCTFail("expected an image error")
        } catch {
            XCTAssertFalse((error as? LocalizedError)?.errorDescription?.isEmpty ?? true, "\(error)")
        }
        // A corrupt weight file is an invalidModel error naming the path.
        let corrupt = FileManager.default.temporaryDirectory.appendingPathComponent("corrupt-\(UUID()).safetensors")
        try Data([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).write(to: corrupt)
        defer { try? FileManager.default.removeItem(at: corrupt) }
        XCTAssertThrowsError(try YOLO(contentsOf: corrupt)) { error in
            guard case .invalidModel(path: corrupt.path, _)? = error as? YOLOError else { return XCTFail("\(error)") }
        }
    }

    func testJSONKeysFollowTheReference() async throws {
        let yolo = try await model("yolo26n")
        var result = try await yolo.predict(shared().appendingPathComponent("images/bus.jpg").path)
        result.path = "bus.jpg"
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(result)) as? [String: Any])
        XCTAssertEqual(Set(object.keys), ["image", "orig_shape", "input_shape", "speed_ms", "boxes"])
        let boxes = try XCTUnwrap(object["boxes"] as? [String: Any])
        XCTAssertEqual(Set(boxes.keys), ["xyxy", "conf", "cls", "name"])
        XCTAssertEqual(try JSONDecoder().decode(DetectionResult.self, from: JSONEncoder().encode(result)).boxes, result.boxes)
    }
}

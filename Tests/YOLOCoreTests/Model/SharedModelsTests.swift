import Foundation
import TestSupport
import XCTest
import YOLOCore

/// `YOLO.shared`: one load per name and precision, however many ask at once; `evict` forgets it.
final class SharedModelsTests: XCTestCase {
    func testEightConcurrentCallersShareOneLoad() async throws {
        let path = try weightsFile("yolo26n").path
        YOLO.evict(path)
        let models = try await withThrowingTaskGroup(of: YOLO.self) { group in
            for _ in 0..<8 { group.addTask { try await YOLO.shared(path) } }
            return try await group.reduce(into: [YOLO]()) { $0.append($1) }
        }
        XCTAssertEqual(models.count, 8)
        XCTAssertTrue(models.allSatisfy { $0 === models[0] }, "one instance: loaded once")
        let again = try await YOLO.shared(path)
        XCTAssertTrue(again === models[0])
        let int8 = try await YOLO.shared(path, precision: .int8)
        XCTAssertFalse(int8 === models[0], "another precision, another model")
        XCTAssertEqual(int8.precision, .int8)

        YOLO.evict(path)
        let reloaded = try await YOLO.shared(path)
        XCTAssertFalse(reloaded === models[0], "evicted: loaded anew")
        YOLO.evict(path)
    }

    func testAFailedLoadIsNotKept() async throws {
        let missing = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-missing-\(UUID().uuidString).pt").path
        for _ in 0..<2 {
            do {
                _ = try await YOLO.shared(missing)
                XCTFail("expected modelNotFound")
            } catch let error as YOLOError {
                XCTAssertEqual(error, .modelNotFound(name: missing, searched: [missing]))
            }
        }
    }
}

import Foundation
import TestSupport
import XCTest
import YOLOCore

/// One shared model under many concurrent predictions gives, for each image, exactly the
/// result of a sequential prediction. scripts/sanitize runs this under ThreadSanitizer.
final class ConcurrencyStressTests: XCTestCase {
    private static let tasks = 8
    private static let predictionsPerTask = 200

    /// Boxes as bit patterns, so that equal means bit-equal.
    private struct Fingerprint: Equatable {
        let bits: [[UInt32]]
        let classes: [Int]

        init(_ boxes: [Box]) {
            bits = boxes.map { $0.xyxy.map(\.bitPattern) + [$0.conf.bitPattern] }
            classes = boxes.map(\.cls)
        }
    }

    func testConcurrentPredictionsMatchSequentialOnes() async throws {
        var configuration = YOLOConfiguration()
        // Small inputs keep 1600 predictions to seconds (sharing is what is under test); a low
        // threshold keeps boxes to compare at that size.
        configuration.imageSize = 128
        configuration.confidenceThreshold = 0.05
        let model = try YOLO(contentsOf: weightsFile("yolo26n"),
                             configuration: configuration)
        let images = try ["bus", "zidane"].map {
            try Image(contentsOf: sharedFile("images/\($0).jpg"))
        }
        var sequential = [Fingerprint]()
        for image in images {
            sequential.append(Fingerprint(try await model.predict(image).boxes))
        }
        let expected = sequential
        XCTAssert(expected.allSatisfy { !$0.classes.isEmpty }, "no detections to compare")

        let mismatches = try await withThrowingTaskGroup(of: Int.self) { group in
            for task in 0..<Self.tasks {
                group.addTask {
                    var mismatches = 0
                    for i in 0..<Self.predictionsPerTask {
                        let which = (task + i) % images.count
                        if Fingerprint(try await model.predict(images[which]).boxes) != expected[which] {
                            mismatches += 1
                        }
                    }
                    return mismatches
                }
            }
            return try await group.reduce(0, +)
        }
        XCTAssertEqual(mismatches, 0, "of \(Self.tasks * Self.predictionsPerTask) concurrent predictions")
    }
}

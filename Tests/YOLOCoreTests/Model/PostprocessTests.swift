import Tensor
import TestSupport
import XCTest
import YOLOCore
import YOLONet

/// Plain greedy NMS: the oracle for the SIMD version.
private func referenceNMS(_ boxes: [SIMD4<Float>], offsets: [Float], iou threshold: Float, limit: Int) -> [Int] {
    var keep = [Int](), suppressed = Set<Int>()
    for i in boxes.indices where !suppressed.contains(i) {
        keep.append(i)
        if keep.count == limit { break }
        let a = boxes[i] + offsets[i]
        for j in (i + 1)..<boxes.count {
            let b = boxes[j] + offsets[j]
            let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
            let inter = w * h
            let union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
            if inter / union > threshold { suppressed.insert(j) }
        }
    }
    return keep
}

final class PostprocessTests: XCTestCase {
    func testGreedyNMSMatchesReferenceOnRandomBoxes() {
        var g = SeededGenerator(seed: 26)
        for n in [1, 7, 13, 16, 17, 127, 400] {
            let boxes = (0..<n).map { _ -> SIMD4<Float> in
                let x = Float.random(in: 0...600, using: &g), y = Float.random(in: 0...600, using: &g)
                return SIMD4(x, y, x + Float.random(in: 1...120, using: &g), y + Float.random(in: 1...120, using: &g))
            }
            let offsets = (0..<n).map { _ in Float(Int.random(in: 0..<3, using: &g)) * 7680 }
            for threshold: Float in [0.3, 0.5, 0.7] {
                XCTAssertEqual(greedyNMS(boxes, offsets: offsets, iouThreshold: threshold, limit: 300),
                               referenceNMS(boxes, offsets: offsets, iou: threshold, limit: 300), "n \(n) iou \(threshold)")
            }
        }
    }

    func testCraftedOverlapsClassesAndAgnostic() {
        // cx, cy, w, h then probabilities of 2 classes; 4 anchors.
        // a0 and a1 overlap heavily (IoU 0.81) with the same class → a1 suppressed.
        // a2 overlaps a0 equally but is class 1 → kept unless agnostic.
        // a3 is below the confidence threshold.
        let anchors: [[Float]] = [
            [100, 100, 100, 100, 0.9, 0.1],
            [105, 105, 100, 100, 0.8, 0.1],
            [102, 102, 100, 100, 0.1, 0.85],
            [400, 400, 50, 50, 0.2, 0.1],
        ]
        var p = Tensor(zeros: [1, 6, 4])
        for (i, a) in anchors.enumerated() { for r in 0..<6 { p.scalars[r * 4 + i] = a[r] } }
        var config = YOLOConfiguration()
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.cls), [0, 1])
        XCTAssertEqual(nonMaxSuppression(p, config).first?.box, SIMD4(50, 50, 150, 150))
        config.agnosticNMS = true
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.score), [0.9])
        config.agnosticNMS = false
        config.classes = [1]
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.cls), [1])
        config.classes = nil
        config.confidenceThreshold = 0.15
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.score), [0.9, 0.85, 0.2])
        config.maxDetections = 2
        XCTAssertEqual(nonMaxSuppression(p, config).count, 2)
        config.iouThreshold = 0.9
        config.maxDetections = 300
        XCTAssertEqual(nonMaxSuppression(p, config).count, 4, "IoU 0.81 < 0.9 keeps the overlapping box")
    }

    /// `excludedClasses` filters before NMS, as `classes`: the box it drops suppresses nothing.
    func testExcludedClassesFilterBeforeNMS() {
        let anchors: [[Float]] = [[100, 100, 100, 100, 0.9, 0.1], [102, 102, 100, 100, 0.1, 0.85]]
        var p = Tensor(zeros: [1, 6, 2])
        for (i, a) in anchors.enumerated() { for r in 0..<6 { p.scalars[r * 2 + i] = a[r] } }
        var config = YOLOConfiguration()
        config.agnosticNMS = true
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.cls), [0])
        config.excludedClasses = [0]
        XCTAssertEqual(nonMaxSuppression(p, config).map(\.cls), [1], "class 0 gone before NMS")
        let rows = Tensor(shape: [1, 3, 6], scalars: [0, 0, 10, 10, 0.9, 2, 5, 5, 20, 20, 0.5, 1, 1, 1, 2, 2, 0.4, 0])
        config.excludedClasses = [2, 0]
        XCTAssertEqual(selectEndToEnd(rows, config).map(\.cls), [1])
        config.classes = [2]
        XCTAssertEqual(selectEndToEnd(rows, config).map(\.cls), [], "both filters apply")
    }

    /// Of two final boxes of different classes overlapping by more than `overlapThreshold`, the
    /// lower priority goes; same classes, equal priorities and the threshold itself keep both.
    func testClassPrioritySuppression() {
        // End-to-end rows (x1, y1, x2, y2, score, class), as NMS leaves them.
        let rows: [[Float]] = [
            [5, 5, 105, 105, 0.9, 7],       // truck on the car: IoU 0.82
            [10, 10, 110, 110, 0.8, 0],     // person (priority 0) on the car: IoU 0.68
            [0, 0, 100, 40, 0.7, 7],        // truck touching the car: IoU 0.4
            [0, 0, 100, 100, 0.6, 2],       // car
            [2, 2, 102, 102, 0.55, 2],      // another car on the car
            [300, 300, 350, 350, 0.5, 16],  // dog, alone
            [302, 302, 352, 352, 0.45, 17], // horse on the dog, both priority 0
        ]
        var config = YOLOConfiguration()
        let detections = selectEndToEnd(Tensor(shape: [1, rows.count, 6], scalars: rows.flatMap { $0 }), config)
        XCTAssertEqual(detections.count, 7)
        XCTAssertEqual(suppressByPriority(detections, config, rotated: false), detections, "no priorities")
        config.classPriority = [2: 10, 7: 5]
        XCTAssertEqual(suppressByPriority(detections, config, rotated: false).map(\.score), [0.7, 0.6, 0.55, 0.5, 0.45])
        config.overlapThreshold = 0.75  // the person overlaps the second car by 0.73
        XCTAssertEqual(suppressByPriority(detections, config, rotated: false).map(\.score), [0.8, 0.7, 0.6, 0.55, 0.5, 0.45])
        // Rotated boxes compare by probabilistic IoU.
        let rotated = selectEndToEnd(Tensor(shape: [1, 2, 7], scalars: [50, 50, 100, 20, 0.9, 7, 0.3, 51, 50, 100, 20, 0.8, 2, 0.3]), config)
        XCTAssertEqual(suppressByPriority(rotated, config, rotated: true).map(\.cls), [2])
    }

    func testTiesKeepAnchorOrder() {
        var p = Tensor(zeros: [1, 5, 3])
        for i in 0..<3 {
            p.scalars[i] = Float(100 * i); p.scalars[3 + i] = 0
            p.scalars[6 + i] = 10; p.scalars[9 + i] = 10; p.scalars[12 + i] = 0.5
        }
        XCTAssertEqual(nonMaxSuppression(p, YOLOConfiguration()).map { $0.box[0] }, [-5, 95, 195])
    }

    func testEndToEndSelection() {
        let rows = Tensor(shape: [1, 3, 6], scalars: [0, 0, 10, 10, 0.9, 2, 5, 5, 20, 20, 0.5, 1, 1, 1, 2, 2, 0.1, 0])
        var config = YOLOConfiguration()
        XCTAssertEqual(selectEndToEnd(rows, config).map(\.cls), [2, 1])
        config.classes = [1, 0]
        XCTAssertEqual(selectEndToEnd(rows, config).map(\.cls), [1])
        config.classes = nil
        config.maxDetections = 1
        XCTAssertEqual(selectEndToEnd(rows, config).map(\.cls), [2])
    }

    func testConfigurationValidation() {
        var config = YOLOConfiguration()
        XCTAssertNoThrow(try config.validate())
        config.confidenceThreshold = 1.5
        XCTAssertThrowsError(try config.validate()) { error in
            XCTAssertEqual(error as? YOLOError, .invalidConfiguration(field: "confidenceThreshold", value: "1.5", reason: "must be in 0…1"))
        }
        config = YOLOConfiguration()
        config.maxDetections = 0
        XCTAssertThrowsError(try config.validate())
        config = YOLOConfiguration()
        config.iouThreshold = -0.1
        XCTAssertThrowsError(try config.validate())
        config = YOLOConfiguration()
        config.excludedClasses = [3, -1]
        XCTAssertThrowsError(try config.validate()) { error in
            XCTAssertEqual(error as? YOLOError, .invalidConfiguration(field: "excludedClasses", value: "-1", reason: "class indices are ≥ 0"))
        }
        config = YOLOConfiguration()
        config.overlapThreshold = 1.5
        XCTAssertThrowsError(try config.validate())
    }
}

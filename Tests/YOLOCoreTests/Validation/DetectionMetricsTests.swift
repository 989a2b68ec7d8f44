import XCTest
import YOLOCore

/// The metric maths on cases small enough to work out by hand.
final class DetectionMetricsTests: XCTestCase {
    /// A perfect detector still scores 0.995, not 1: the 101-point trapezoid ends on precision 0
    /// at recall 1 (the sentinel), losing half of the last 0.01 step.
    func testOneCorrectBox() {
        let iou = boxIoU([SIMD4(0, 0, 10, 10)], [SIMD4(0, 0, 10, 10)])
        XCTAssertEqual(iou[0][0], 1, accuracy: 1e-6)
        let correct = matchPredictions(predictedClasses: [3], labelClasses: [3], iou: iou)
        XCTAssertEqual(correct, [[Bool](repeating: true, count: 10)])
        let m = ClassMetrics(correct: correct, confidence: [0.9], predictedClasses: [3], labelClasses: [3])
        XCTAssertEqual(m.classes, [3])
        XCTAssertEqual(m.mAP50, 0.995, accuracy: 1e-12)
        XCTAssertEqual(m.mAP50to95, 0.995, accuracy: 1e-12)
        XCTAssertEqual(m.precision, [1])
        XCTAssertEqual(m.recall, [1])
    }

    func testBoxIoU() {
        // Half of each box overlaps: 50 / 150.
        XCTAssertEqual(boxIoU([SIMD4(0, 0, 10, 10)], [SIMD4(5, 0, 15, 10), SIMD4(20, 20, 30, 30)])[0], [1.0 / 3, 0],
                       "disjoint boxes have IoU 0")
    }

    func testNoPredictions() {
        let m = ClassMetrics(correct: [], confidence: [], predictedClasses: [], labelClasses: [0, 0, 2])
        XCTAssertEqual(m.classes, [0, 2])
        XCTAssertEqual(m.labelCounts, [2, 1])
        XCTAssertEqual(m.ap, [[Double](repeating: 0, count: 10), [Double](repeating: 0, count: 10)])
        XCTAssertEqual(m.mAP50, 0)
        XCTAssertEqual(m.meanPrecision, 0)
        XCTAssertEqual(m.meanRecall, 0)
    }

    /// Predictions of classes without labels count nowhere; with no labels at all every mean is 0.
    func testNoLabels() {
        let m = ClassMetrics(correct: [[Bool](repeating: false, count: 10)], confidence: [0.8], predictedClasses: [1],
                             labelClasses: [])
        XCTAssertEqual(m.classes, [])
        XCTAssertEqual(m.mAP50, 0)
        XCTAssertEqual(m.mAP50to95, 0)
        XCTAssertEqual(m.meanPrecision, 0)
    }

    func testAllWrongClass() {
        let iou = boxIoU([SIMD4(0, 0, 10, 10)], [SIMD4(0, 0, 10, 10)])
        let correct = matchPredictions(predictedClasses: [1], labelClasses: [0], iou: iou)
        XCTAssertEqual(correct, [[Bool](repeating: false, count: 10)])
        let m = ClassMetrics(correct: correct, confidence: [0.9], predictedClasses: [1], labelClasses: [0])
        XCTAssertEqual(m.classes, [0])
        XCTAssertEqual(m.mAP50, 0)
        XCTAssertEqual(m.recall, [0])
    }

    /// Equal confidences keep the predictions' order (as NumPy's sort does for short arrays):
    /// a true positive first gives AP 0.995; a false positive first leaves precision 0.5 at
    /// every recall, AP 0.5 · 0.99 + 0.5 · 0.5 · 0.01.
    func testTiesInConfidence() {
        let hitFirst = ClassMetrics(correct: [[true], [false]], confidence: [0.5, 0.5], predictedClasses: [0, 0], labelClasses: [0])
        XCTAssertEqual(hitFirst.ap[0][0], 0.995, accuracy: 1e-12)
        let missFirst = ClassMetrics(correct: [[false], [true]], confidence: [0.5, 0.5], predictedClasses: [0, 0], labelClasses: [0])
        XCTAssertEqual(missFirst.ap[0][0], 0.4975, accuracy: 1e-12)
    }

    /// Recall 0.5 at precision 1, a miss, then recall 1 at precision 2/3: the envelope is 1 below
    /// recall 0.5 and 2/3 from there to 1.
    func testAveragePrecisionByHand() {
        let (ap, envelope, recall) = averagePrecision(recall: [0.5, 0.5, 1], precision: [1, 0.5, 2.0 / 3])
        XCTAssertEqual(recall, [0, 0.5, 0.5, 1, 1, 1])
        XCTAssertEqual(envelope, [1, 1, 2.0 / 3, 2.0 / 3, 0, 0])
        // Points 0…50 are 1 except recall 0.5 itself, where np.interp takes the last repeated x
        // (2/3); 51…99 are 2/3; 100 is 0.
        let y = [Double](repeating: 1, count: 50) + [Double](repeating: 2.0 / 3, count: 50) + [0]
        var expected = 0.0
        for i in 1..<y.count { expected += 0.01 * (y[i] + y[i - 1]) / 2 }
        XCTAssertEqual(ap, expected, accuracy: 1e-12)
    }

    /// The more confident prediction claims the label at the thresholds it reaches, even when a
    /// later one overlaps it more; the later one takes it at the higher thresholds.
    func testMatchingIsGreedyInConfidenceOrder() {
        let correct = matchPredictions(predictedClasses: [0, 0], labelClasses: [0], iou: [[0.6, 0.9]])
        XCTAssertEqual(correct[0], [true, true, true, false, false, false, false, false, false, false])
        XCTAssertEqual(correct[1], [false, false, false, true, true, true, true, true, true, false])
    }

    /// Two labels, two predictions: each prediction takes the unclaimed label it overlaps most.
    func testMatchingPicksBestUnclaimedLabel() {
        let correct = matchPredictions(predictedClasses: [0, 0], labelClasses: [0, 0], iou: [[0.8, 0.7], [0.75, 0.6]])
        XCTAssertEqual(correct[0], [true, true, true, true, true, true, true, false, false, false])
        // Label 0 is taken up to 0.8, so the second prediction falls back on label 1 (IoU 0.6);
        // above 0.8 label 0 is free but 0.7 is too little.
        XCTAssertEqual(correct[1], [true, true, true, false, false, false, false, false, false, false])
    }

    /// np.interp: below and above the range give `left` / `right` (default the end values); a
    /// repeated x takes the last repeated value.
    func testInterpolate() {
        XCTAssertEqual(interpolate(0.5, [0, 1], [0, 10]), 5)
        XCTAssertEqual(interpolate(-1, [0, 1], [3, 10]), 3)
        XCTAssertEqual(interpolate(-1, [0, 1], [3, 10], left: 7), 7)
        XCTAssertEqual(interpolate(2, [0, 1], [3, 10]), 10)
        XCTAssertEqual(interpolate(1, [0, 1, 1, 2], [0, 4, 6, 8]), 6)
        XCTAssertEqual(interpolate(1.5, [0, 1, 1, 2], [0, 4, 6, 8]), 7)
    }

    /// coco8's val images (h / w 0.747, 0.763, 1.312, 1.331) in one batch span both
    /// orientations: a square 672 (20.5 strides, rounded up). Alone, a landscape image gets
    /// ceil(0.747 · 20 + 0.5) = 16 strides of height.
    func testBatchShapes() {
        let ratios = [0.746875, 0.7625, 1.3123359580052494, 1.3305613305613306]
        XCTAssertEqual(batchShapes(ratios, batch: 16, size: 640, stride: 32).map { [$0.height, $0.width] }, [[672, 672]])
        XCTAssertEqual(batchShapes(ratios, batch: 2, size: 640, stride: 32).map { [$0.height, $0.width] },
                       [[512, 672], [672, 512]])
    }
}

import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// The legacy task heads (YOLOv8 to YOLO12) and YOLOv10's, on a small graph of plain convs
/// (no C3k2, A2C2f or C2fCIB: legacy class branches) ending in the head under test.
final class HeadTests: XCTestCase {
    /// The graph: P3, P4, P5 at 32, 48, 64 channels, 3 classes.
    private func architecture(_ head: String, _ args: String, extra: String = "") throws -> Architecture {
        try Architecture(json: """
            {"nc": 3, "scales": {"t": [1.0, 1.0, 1024]}, "scale": "t"\(extra),
             "backbone": [[-1, 1, "Conv", [16, 3, 2]], [-1, 1, "Conv", [32, 3, 2]], [-1, 1, "Conv", [32, 3, 2]],
                          [-1, 1, "Conv", [48, 3, 2]], [-1, 1, "Conv", [64, 3, 2]], [-1, 1, "SPPF", [64, 5]]],
             "head": [[-1, 1, "nn.Upsample", ["None", 2, "nearest"]], [[-1, 3], 1, "Concat", [1]], [-1, 1, "Conv", [48, 3, 1]],
                      [-1, 1, "nn.Upsample", ["None", 2, "nearest"]], [[-1, 2], 1, "Concat", [1]], [-1, 1, "Conv", [32, 3, 1]],
                      [[11, 8, 5], 1, "\(head)", \(args)]]}
            """)
    }

    /// The unfused graphs have the parameter counts PyTorch reports for them (Ultralytics
    /// 8.4.190): the legacy class branch, Segment's cv4 and Proto, Pose's and OBB's cv4, and
    /// v10Detect's two heads with their depthwise class branches.
    func testParameterCountsMatchPyTorch() throws {
        let cases: [(String, String, String, Int)] = [
            ("Detect", "[\"nc\"]", "", 414_729), ("Segment", "[\"nc\", 32, 64]", "", 561_513),
            ("Pose", "[\"nc\", \"kpt_shape\"]", ", \"kpt_shape\": [5, 3]", 441_144), ("OBB", "[\"nc\", 1]", "", 426_948),
            ("v10Detect", "[\"nc\"]", "", 573_714),
        ]
        for (head, args, extra, count) in cases {
            var weights = RandomWeights()
            let network = try Network(architecture: try architecture(head, args, extra: extra), weights: &weights)
            XCTAssertEqual(weights.parameterCount, count, head)
            XCTAssertEqual(network.classCount, 3, head)
        }
    }

    /// Anchor centres (x, y) in cells and strides of the levels of an `h` × `w` input.
    private func anchors(h: Int, w: Int) -> [(x: Float, y: Float, stride: Float)] {
        [8, 16, 32].flatMap { s in
            (0..<(h / s)).flatMap { gy in (0..<(w / s)).map { gx in (Float(gx) + 0.5, Float(gy) + 0.5, Float(s)) } }
        }
    }

    /// DFL: each side's expected bin under a softmax over its 16. boxes: [1, 64, A].
    private func distances(_ boxes: Tensor, anchor i: Int) -> [Float] {
        let a = boxes.shape[2]
        return (0..<4).map { side in
            let logits = (0..<16).map { boxes.scalars[(side * 16 + $0) * a + i] }
            let top = logits.max()!, e = logits.map { exp($0 - top) }, sum = e.reduce(0, +)
            return zip(e, 0..<16).reduce(0) { $0 + $1.0 / sum * Float($1.1) }
        }
    }

    private func sigmoid(_ x: Float) -> Float { 1 / (1 + exp(-x)) }

    /// Pose: the dense output [1, 4 + nc + K·3, A] is the boxes (cx, cy, w, h) and the class
    /// probabilities from the raw maps, then each keypoint at (2·x + anchor − ½)·stride with
    /// its visibility's sigmoid (Ultralytics `Pose.kpts_decode`), recomputed here plainly.
    func testPoseDenseOutputDecodesTheRawMaps() throws {
        var weights = TrainedBins()
        let network = try Network(architecture: try architecture("Pose", "[\"nc\", \"kpt_shape\"]", extra: ", \"kpt_shape\": [5, 3]"),
                                  weights: &weights)
        let (h, w) = (64, 96), x = randomTensor([1, 3, 64, 96], seed: 7, range: 0...1)
        let out = try network.forward(x)
        let boxes = try XCTUnwrap(out.raw["boxes"]), scores = try XCTUnwrap(out.raw["scores"])
        let kpts = try XCTUnwrap(out.raw["kpts"]), grid = anchors(h: h, w: w), a = grid.count
        XCTAssertEqual(out.output.shape, [1, 4 + 3 + 15, a])
        var worst: Float = 0
        func check(_ row: Int, _ i: Int, _ expected: Float) {
            worst = max(worst, abs(out.output.scalars[row * a + i] - expected) / max(1, abs(expected)))
        }
        for (i, anchor) in grid.enumerated() {
            let d = distances(boxes, anchor: i)
            let (x1, y1, x2, y2) = (anchor.x - d[0], anchor.y - d[1], anchor.x + d[2], anchor.y + d[3])
            for (row, v) in [(x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1].enumerated() { check(row, i, v * anchor.stride) }
            for c in 0..<3 { check(4 + c, i, sigmoid(scores.scalars[c * a + i])) }
            for k in 0..<5 {
                let kx = kpts.scalars[(3 * k) * a + i], ky = kpts.scalars[(3 * k + 1) * a + i]
                check(7 + 3 * k, i, (kx * 2 + anchor.x - 0.5) * anchor.stride)
                check(7 + 3 * k + 1, i, (ky * 2 + anchor.y - 0.5) * anchor.stride)
                check(7 + 3 * k + 2, i, sigmoid(kpts.scalars[(3 * k + 2) * a + i]))
            }
        }
        XCTAssertLessThan(worst, 1e-5)
    }

    /// OBB: the angle map is (sigmoid − ¼)·π, inside [−π/4, 3π/4]; the dense output is the box
    /// rotated by it about the anchor (Ultralytics `dist2rbox`), the class probabilities and
    /// the angle, recomputed here plainly.
    func testOBBDenseOutputRotatesBoxesByTheMappedAngle() throws {
        var weights = TrainedBins()
        let network = try Network(architecture: try architecture("OBB", "[\"nc\", 1]"), weights: &weights)
        let (h, w) = (64, 96), x = randomTensor([1, 3, 64, 96], seed: 8, range: 0...1)
        let out = try network.forward(x)
        let boxes = try XCTUnwrap(out.raw["boxes"]), angle = try XCTUnwrap(out.raw["angle"])
        let grid = anchors(h: h, w: w), a = grid.count
        XCTAssertEqual(out.output.shape, [1, 4 + 3 + 1, a])
        XCTAssertTrue(angle.scalars.allSatisfy { $0 >= -Float.pi / 4 && $0 <= 3 * Float.pi / 4 })
        XCTAssertGreaterThan(Set(angle.scalars).count, 1)
        var worst: Float = 0
        for (i, anchor) in grid.enumerated() {
            let d = distances(boxes, anchor: i), theta = angle.scalars[i]
            let xf = (d[2] - d[0]) / 2, yf = (d[3] - d[1]) / 2
            let expected = [(xf * cos(theta) - yf * sin(theta) + anchor.x) * anchor.stride,
                            (xf * sin(theta) + yf * cos(theta) + anchor.y) * anchor.stride,
                            (d[0] + d[2]) * anchor.stride, (d[1] + d[3]) * anchor.stride]
            for (row, v) in expected.enumerated() {
                worst = max(worst, abs(out.output.scalars[row * a + i] - v) / max(1, abs(v)))
            }
            XCTAssertEqual(out.output.scalars[7 * a + i], theta)
        }
        XCTAssertLessThan(worst, 1e-5)
    }

    /// Segment: Proto on P3 gives [1, 32, H/4, W/4] prototypes; the dense output carries the
    /// raw mask coefficients after the class probabilities.
    func testSegmentPrototypesAndCoefficients() throws {
        var weights = RandomWeights()
        let network = try Network(architecture: try architecture("Segment", "[\"nc\", 32, 64]"), weights: &weights)
        XCTAssertEqual(network.task, .segment)
        let out = try network.forward(randomTensor([1, 3, 64, 96], seed: 9, range: 0...1))
        let a = anchors(h: 64, w: 96).count
        XCTAssertEqual(out.protos?.shape, [1, 32, 16, 24])
        XCTAssertEqual(out.output.shape, [1, 4 + 3 + 32, a])
        let coefficients = try XCTUnwrap(out.raw["mask_coefficient"])
        XCTAssertEqual(Array(out.output.scalars[(7 * a)...]), coefficients.scalars)
    }

    /// v10Detect runs its one-to-one branch with the top-k when the file says end2end, its
    /// one-to-many branch densely otherwise; both branches are bound either way.
    func testV10DetectFollowsEndToEnd() throws {
        var arch = try architecture("v10Detect", "[\"nc\"]")
        let x = randomTensor([1, 3, 64, 96], seed: 10, range: 0...1), a = anchors(h: 64, w: 96).count
        for endToEnd in [true, false] {
            arch.endToEnd = endToEnd
            var weights = RandomWeights()
            let out = try Network(architecture: arch, weights: &weights).forward(x)
            XCTAssertEqual(weights.parameterCount, 573_714)
            XCTAssertEqual(out.output.shape, endToEnd ? [1, min(300, a), 6] : [1, 4 + 3, a])
        }
    }
}

/// Random weights but for the DFL's bins, 0, 1, …, 15 as in every Ultralytics model.
private struct TrainedBins: WeightSource {
    var random = RandomWeights()
    var precision: Precision { random.precision }

    mutating func conv(_ prefix: String, cout: Int, cinPerGroup: Int, kernel: Int, plain: Bool) throws
        -> (weight: Tensor, bias: [Float]) {
        try random.conv(prefix, cout: cout, cinPerGroup: cinPerGroup, kernel: kernel, plain: plain)
    }

    mutating func tensor(_ name: String, shape: [Int]) throws -> Tensor {
        guard name.hasSuffix(".dfl.conv.weight") else { return try random.tensor(name, shape: shape) }
        return Tensor(shape: shape, scalars: (0..<shape.reduce(1, *)).map(Float.init))
    }

    func contains(prefix: String) -> Bool { random.contains(prefix: prefix) }
    mutating func discard(prefix: String) { random.discard(prefix: prefix) }
}

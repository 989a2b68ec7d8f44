import Foundation
import TestSupport
import XCTest
import YOLONet

final class ArchitectureTests: XCTestCase {
    /// Building the unfused graphs (both heads, BatchNorm unfolded) gives the parameter counts
    /// PyTorch reports for every scale: conv weights and biases, BatchNorm γ and β, DFL's 16.
    func testParameterCountsMatchPyTorch() throws {
        let expected: [String: Int] = [
            "yolo26n": 2_572_280, "yolo26s": 10_009_784, "yolo26m": 21_896_248, "yolo26l": 26_299_704, "yolo26x": 58_993_368,
            "yolo11n": 2_624_080, "yolo11s": 9_458_752, "yolo11m": 20_114_688, "yolo11l": 25_372_160, "yolo11x": 56_966_176,
            "yolo11n-seg": 2_876_848, "yolo11s-seg": 10_113_248, "yolo11n-pose": 2_908_507, "yolo11s-pose": 9_948_811,
            "yolo11n-obb": 2_695_747, "yolo11s-obb": 9_744_931,
        ]
        for (name, count) in expected.sorted(by: { $0.key < $1.key }) {
            let arch = try XCTUnwrap(try Architecture.builtin(named: name), name)
            var weights = RandomWeights()
            _ = try Network(architecture: arch, weights: &weights)
            XCTAssertEqual(weights.parameterCount, count, "\(name) parameters")
        }
    }

    func testBuiltinNames() throws {
        XCTAssertNil(try Architecture.builtin(named: "yolo26q"))
        XCTAssertNil(try Architecture.builtin(named: "resnet50"))
        XCTAssertEqual(try Architecture.builtin(named: "yolo11m")?.scale, "m")
        XCTAssertEqual(try Architecture.builtin(named: "yolo26s-seg")?.head.last?.module, "Segment26")
        XCTAssertNil(try Architecture.builtin(named: "yolo26n-depth"))
        // Every YOLO26 and YOLO11 task graph builds from its spec with random weights.
        for family in ["yolo26n", "yolo11n"] {
            for task in ["", "-seg", "-pose", "-obb", "-cls"] {
                var weights = RandomWeights()
                let arch = try XCTUnwrap(try Architecture.builtin(named: family + task))
                XCTAssertNoThrow(try Network(architecture: arch, weights: &weights), family + task)
            }
        }
    }

    func testRoundingRules() {
        XCTAssertEqual(makeDivisible(1024 * 0.25), 256)
        XCTAssertEqual(makeDivisible(100 * 0.25), 32)
        XCTAssertEqual(scaledRepeats(2, depth: 0.5), 1)
        XCTAssertEqual(scaledRepeats(5, depth: 0.5), 2, "Python rounds half to even")
        XCTAssertEqual(scaledRepeats(3, depth: 0.5), 2)
        XCTAssertEqual(scaledRepeats(1, depth: 0.33), 1)
    }
}

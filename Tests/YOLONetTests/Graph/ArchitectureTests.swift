import Foundation
import TestSupport
import XCTest
import YOLONet

final class ArchitectureTests: XCTestCase {
    /// Building the unfused graphs (both heads, BatchNorm unfolded) gives the parameter counts
    /// PyTorch reports for every scale: conv weights and biases, BatchNorm γ and β, DFL's 16.
    /// (Ultralytics 8.4.190 builds the older families' yamls by these names; yolov5n6u as yolov5n-p6.)
    func testParameterCountsMatchPyTorch() throws {
        let expected: [String: Int] = [
            "yolo26n": 2_572_280, "yolo26s": 10_009_784, "yolo26m": 21_896_248, "yolo26l": 26_299_704, "yolo26x": 58_993_368,
            "yolo11n": 2_624_080, "yolo11s": 9_458_752, "yolo11m": 20_114_688, "yolo11l": 25_372_160, "yolo11x": 56_966_176,
            "yolo11n-seg": 2_876_848, "yolo11s-seg": 10_113_248, "yolo11n-pose": 2_908_507, "yolo11s-pose": 9_948_811,
            "yolo11n-obb": 2_695_747, "yolo11s-obb": 9_744_931,
            "yolov3u": 103_754_144, "yolov3-tinyu": 12_173_248, "yolov3-sppu": 104_803_744, "yolov5nu": 2_654_816,
            "yolov5n6u": 4_334_896, "yolov6n": 4_500_080, "yolov8n": 3_157_200, "yolov8s": 11_166_560, "yolov8n-p2": 3_354_144,
            "yolov8n-p6": 4_984_352, "yolov8n-ghost": 1_865_316, "yolov8n-ghost-p2": 2_033_944, "yolov8n-ghost-p6": 2_901_100,
            "yolov8n-cls": 2_719_288,
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
        XCTAssertNil(try Architecture.builtin(named: "yolov8"), "a family with scales needs one")
        XCTAssertNil(try Architecture.builtin(named: "yolov8q"))
        // Ultralytics' names: a v3/v5 "u" is the plain yaml, "yolov5n6" its -p6 variant.
        XCTAssertEqual(try Architecture.builtin(named: "yolov5nu")?.scale, "n")
        XCTAssertEqual(try Architecture.builtin(named: "yolov5s6u")?.rows.count, 34)
        XCTAssertEqual(try Architecture.builtin(named: "yolov8m-ghost-p2")?.scale, "m")
        XCTAssertEqual(try Architecture.builtin(named: "yolov8x-seg-p6")?.head.last?.module, "Segment")
        let tiny = try XCTUnwrap(try Architecture.builtin(named: "yolov3-tinyu"))
        XCTAssertNil(tiny.scale)
        XCTAssertEqual(tiny.rows[11].module, "nn.ZeroPad2d")
        XCTAssertEqual(try Architecture.builtin(named: "yolov6l")?.activation(), .relu)
        // Every YOLO26 and YOLO11 task graph builds from its spec with random weights.
        for family in ["yolo26n", "yolo11n"] {
            for task in ["", "-seg", "-pose", "-obb", "-cls"] {
                var weights = RandomWeights()
                let arch = try XCTUnwrap(try Architecture.builtin(named: family + task))
                XCTAssertNoThrow(try Network(architecture: arch, weights: &weights), family + task)
            }
        }
    }

    /// Every spec in `Specs/` builds with random weights at its smallest scale.
    func testEveryBuiltinSpecBuilds() throws {
        XCTAssertGreaterThanOrEqual(Architecture.builtinSpecs.count, 28)
        for spec in Architecture.builtinSpecs {
            var arch = try XCTUnwrap(try Architecture.builtin(spec: spec), spec)
            if arch.scales != nil { arch.scale = ["n", "s", "m", "l", "x"].first { arch.scales?[$0] != nil } }
            var weights = RandomWeights()
            XCTAssertNoThrow(try Network(architecture: arch, weights: &weights), spec)
        }
    }

    /// The `activation` key: what Ultralytics accepts of `torch.nn` and the kernels have, or an
    /// error naming it. `depth_multiple` and `width_multiple` scale a spec without `scales`.
    func testActivationAndMultiples() throws {
        func arch(_ extra: String) throws -> Architecture {
            try Architecture(json: #"{"nc": 2, \#(extra) "backbone": [[-1, 1, "Conv", [16, 3, 2]]], "head": [[-1, 1, "Classify", ["nc"]]]}"#)
        }
        XCTAssertEqual(try arch("").activation(), .silu)
        XCTAssertEqual(try arch(#""activation": "torch.nn.ReLU()","#).activation(), .relu)
        XCTAssertEqual(try arch(#""activation": "nn.LeakyReLU(0.1)","#).activation(), .leakyReLU)
        XCTAssertEqual(try arch(#""activation": "nn.SiLU()","#).activation(), .silu)
        XCTAssertThrowsError(try arch(#""activation": "nn.LeakyReLU(0.2)","#).activation()) {
            XCTAssertTrue("\($0)".contains("LeakyReLU(0.2)"), "\($0)")
        }
        var weights = RandomWeights()
        XCTAssertThrowsError(try Network(architecture: try arch(#""activation": "nn.GELU()","#), weights: &weights))
        let scaled = try arch(#""depth_multiple": 0.5, "width_multiple": 0.25, "scale": "n","#)
        XCTAssertEqual(try scaled.multipliers().width, 0.25)
        XCTAssertEqual(try Network(architecture: scaled, weights: &weights).nodes[0].channels, 8)
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

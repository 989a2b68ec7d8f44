import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// YOLOv9 and YOLO12 graphs from their specs (`Specs/yolov9*.json`, `yolo12*.json`): the parameter
/// counts PyTorch reports, a forward pass, and typed errors for rows their modules cannot build.
final class ModernFamiliesTests: XCTestCase {
    private static let specs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("Sources/YOLONet/Specs")

    /// The spec `file` at `scale` (nil: a spec without scales).
    private func spec(_ file: String, scale: String? = nil) throws -> Architecture {
        var arch = try Architecture(json: String(decoding: try Data(contentsOf: Self.specs.appendingPathComponent(file + ".json")),
                                                 as: UTF8.self))
        arch.scale = scale
        return arch
    }

    /// Unfused graphs (RepConv and BatchNorm unfolded), as `ArchitectureTests` counts YOLO26's.
    func testParameterCountsMatchPyTorch() throws {
        let expected: [(file: String, scale: String?, count: Int)] = [
            ("yolov9t", nil, 2_128_720), ("yolov9s", nil, 7_318_368), ("yolov9m", nil, 20_216_160),
            ("yolov9c", nil, 25_590_912), ("yolov9e", nil, 58_206_592),
            ("yolo12", "n", 2_602_288), ("yolo12", "s", 9_284_096), ("yolo12", "m", 20_199_168),
            ("yolo12", "l", 26_450_784), ("yolo12", "x", 59_210_784),
            ("yolo12-cls", "n", 2_999_496), ("yolo12-cls", "l", 16_737_160),
        ]
        for (file, scale, count) in expected {
            var weights = RandomWeights()
            _ = try Network(architecture: try spec(file, scale: scale), weights: &weights)
            XCTAssertEqual(weights.parameterCount, count, "\(file)\(scale ?? "") parameters")
        }
    }

    /// Every module kind runs: AConv/ELAN1 (v9t), ADown/CBLinear/CBFuse (v9e), area attention
    /// (yolo12n), its γ residual (yolo12l). The outputs are finite.
    func testGraphsRun() throws {
        for (file, scale) in [("yolov9t", nil), ("yolov9e", nil), ("yolo12", "n"), ("yolo12", "l"), ("yolo12-cls", "n")] as [(String, String?)] {
            var weights = RandomWeights()
            let network = try Network(architecture: try spec(file, scale: scale), weights: &weights)
            let x = randomTensor([1, 3, 64, 96], seed: 5, range: 0...1)
            let output = try network.forward(x).output
            XCTAssertGreaterThan(output.count, 0, file)
            XCTAssertTrue(output.scalars.allSatisfy(\.isFinite), "\(file)\(scale ?? ""): non-finite outputs")
        }
    }

    /// At the l and x scales an A2C2f with area attention returns x + γ · cv2(…), γ per channel
    /// (`gamma`), and its ABlocks' mlp expands by 1.2.
    func testLargeScaleA2C2fAddsGammaScaledOutput() throws {
        let arch = """
            {"nc": 2, "scales": {"l": [1, 1, 1024]}, "scale": "l",
             "backbone": [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "A2C2f", [64, true, 2]]], "head": [[-1, 1, "Classify", ["nc"]]]}
            """
        let tensors = try randomCheckpoint(arch: arch, task: "classify")
        XCTAssertEqual(tensors["model.1.m.0.1.mlp.0.conv.weight"]?.shape, [38, 32, 1, 1])
        var traced = [String: Tensor]()
        _ = try loadCheckpoint(tensors, arch: arch, task: "classify").network
            .trace(randomTensor([1, 3, 16, 16], seed: 3, range: 0...1)) { traced[$0] = $1 }
        let x = try XCTUnwrap(traced["model.0"]), t = try XCTUnwrap(traced["model.1.cv2"]), y = try XCTUnwrap(traced["model.1"])
        let gamma = try XCTUnwrap(tensors["model.1.gamma"]).scalars, plane = x.shape[2] * x.shape[3]
        let expected = Tensor(shape: x.shape, scalars: x.scalars.indices.map { x.scalars[$0] + gamma[$0 / plane] * t.scalars[$0] })
        assertClose(y, expected, tolerance: 1e-5, "x + γ · cv2")
    }

    /// The memory estimate counts an area attention's scores per area: yolo12n at 1280 × 1280 has
    /// 80² positions in 4 areas at P4 and 40² in one at P5, so 1600² floats at most.
    func testAttentionScoresAreEstimatedPerArea() throws {
        var weights = RandomWeights()
        let network = try Network(architecture: try spec("yolo12", scale: "n"), weights: &weights)
        XCTAssertEqual(network.estimatedBytes(height: 1280, width: 1280, bytesPerPixel: 0), 4 * 1600 * 1600)
    }

    private func assertInvalid(_ json: String, layer: Int, _ reason: String, line: UInt = #line) {
        XCTAssertThrowsError(try { var w = RandomWeights(); _ = try Network(architecture: try Architecture(json: json), weights: &w) }(),
                             line: line) { error in
            guard case .invalidArchitecture(let l, let r)? = error as? ModelError else { return XCTFail("\(error)", line: line) }
            XCTAssertEqual(l, layer, line: line)
            XCTAssertTrue(r.contains(reason), r, line: line)
        }
    }

    func testRowsTheModulesCannotBuildAreNamed() {
        func arch(_ rows: String, scale: String = "n") -> String {
            """
            {"nc": 2, "scales": {"\(scale)": [1, 1, 1024]}, "scale": "\(scale)",
             "backbone": [[-1, 1, "Conv", [32, 3, 2]], \(rows)], "head": [[-1, 1, "Classify", ["nc"]]]}
            """
        }
        assertInvalid(arch(#"[-1, 1, "Conv", [32, 3, 2]], [[0, -1], 1, "CBFuse", [[0]]]"#), layer: 2, "is not a CBLinear")
        assertInvalid(arch(#"[-1, 1, "CBLinear", [[16, 32]]], [[1, 0], 1, "CBFuse", [[2]]]"#), layer: 2, "is not a piece")
        assertInvalid(arch(#"[-1, 1, "CBLinear", [[16, 32]]], [[1, 0], 1, "CBFuse", [[0]]]"#), layer: 2, "has 16 channels")
        assertInvalid(arch(#"[-1, 1, "A2C2f", [48, true, 1]]"#), layer: 1, "multiple of 32")
        assertInvalid(arch(#"[-1, 1, "A2C2f", [64, true, 1, true]]"#, scale: "l"), layer: 1, "implied")
        assertInvalid(arch(#"[-1, 1, "RepNCSPELAN4", [64, 32, 16, 1, 2]]"#), layer: 1, "[c2, c3, c4, n]")
    }
}

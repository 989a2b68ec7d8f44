import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// Each way a weight file can disagree with its architecture gives its own typed error.
final class ModelErrorTests: XCTestCase {
    private struct Fixture {
        var tensors: [String: Tensor]
        var metadata: [String: String]
    }

    private static let base: Fixture? = {
        guard let url = try? weightsFile("yolo26n"), let file = try? SafeTensorsFile(contentsOf: url) else { return nil }
        var tensors = [String: Tensor]()
        for name in file.names { tensors[name] = try? file.tensor(name) }
        return Fixture(tensors: tensors, metadata: file.metadata)
    }()

    /// Writes a modified copy of yolo26n and loads it.
    private func load(_ modify: (inout Fixture) -> Void) throws -> Model {
        var fixture = try XCTUnwrap(Self.base, "yolo26n.safetensors not found")
        modify(&fixture)
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-\(UUID()).safetensors")
        defer { try? FileManager.default.removeItem(at: url) }
        try SafeTensorsFile.write(fixture.tensors, metadata: fixture.metadata, to: url)
        return try Model(contentsOf: url)
    }

    private func assertError(_ expected: ModelError, line: UInt = #line, _ modify: (inout Fixture) -> Void) {
        XCTAssertThrowsError(try load(modify), line: line) { error in
            XCTAssertEqual(error as? ModelError, expected, line: line)
            XCTAssertFalse((error as? LocalizedError)?.errorDescription?.isEmpty ?? true, line: line)
        }
    }

    func testUnmodifiedCopyLoads() throws {
        let model = try load { _ in }
        XCTAssertEqual(model.names.count, 80)
        XCTAssertEqual(model.names[5], "bus")
        XCTAssertEqual(model.network.maxStride, 32)
    }

    func testMissingTensor() {
        assertError(.missingTensor(name: "model.2.m.0.cv1.conv.weight", expectedShape: [8, 16, 3, 3])) {
            $0.tensors["model.2.m.0.cv1.conv.weight"] = nil
        }
    }

    func testShapeMismatch() {
        assertError(.shapeMismatch(name: "model.0.conv.weight", expected: [16, 3, 3, 3], actual: [16, 3, 5, 5])) {
            $0.tensors["model.0.conv.weight"] = Tensor(zeros: [16, 3, 5, 5])
        }
    }

    func testUnusedTensor() {
        assertError(.unusedTensors(names: ["model.99.extra.weight"])) {
            $0.tensors["model.99.extra.weight"] = Tensor(zeros: [3])
        }
    }

    func testUnknownModule() {
        assertError(.unknownModule(layer: 9, module: "SPPX")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(of: "\"SPPF\"", with: "\"SPPX\"")
        }
    }

    func testBadArchitectureJSON() {
        XCTAssertThrowsError(try load { $0.metadata["arch"] = "{\"nc\": 80, \"backbone\": [" }) { error in
            guard case .invalidMetadata(key: "arch", _, _)? = error as? ModelError else {
                return XCTFail("expected invalidMetadata(arch), got \(error)")
            }
        }
    }

    func testMissingArchitecture() {
        assertError(.missingMetadata(key: "arch")) { $0.metadata["arch"] = nil }
    }

    func testBadFromIndex() {
        assertError(.invalidArchitecture(layer: 12, reason: "'from' [-1, 40] must name earlier layers")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(of: "[[-1, 6], 1, \"Concat\"", with: "[[-1, 40], 1, \"Concat\"")
        }
    }

    /// Repeats that trapped on a range (−1) or overflowed `(2 + n) · hidden` (4e18) in the real
    /// yolo26n file's metadata.
    func testAbsurdRepeatsInTheRealFile() {
        assertError(.invalidArchitecture(layer: 10, reason: "C2PSA repeats -1 must be in 1...64")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(of: "[-1, 2, \"C2PSA\"", with: "[-1, -1, \"C2PSA\"")
        }
        assertError(.invalidArchitecture(layer: 2, reason: "C3k2 repeats 4000000000000000000 must be in 1...64")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(
                of: "[-1, 2, \"C3k2\", [256, false, 0.25]]", with: "[-1, 4000000000000000000, \"C3k2\", [256, false, 0.25]]")
        }
        assertError(.invalidArchitecture(layer: 4, reason: "C3k2 repeats 0 must be in 1...64")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(
                of: "[-1, 2, \"C3k2\", [512, false, 0.25]]", with: "[-1, 0, \"C3k2\", [512, false, 0.25]]")
        }
    }

    /// A negative class count was reported as a tensor shape mismatch.
    func testNegativeClassCount() {
        assertError(.invalidMetadata(key: "arch", value: "nc = -5", reason: "the class count must be in 1...100000")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(of: "{\"nc\": 80,", with: "{\"nc\": -5,")
        }
    }

    /// Errors name the offending value.
    func testArgumentErrorsNameTheValue() {
        assertError(.invalidArchitecture(layer: 3, reason: "argument 1 (kernel) = -3 must be an integer in 1...64")) {
            $0.metadata["arch"] = $0.metadata["arch"]!.replacingOccurrences(
                of: "[-1, 1, \"Conv\", [256, 3, 2]], [-1, 2, \"C3k2\", [512", with: "[-1, 1, \"Conv\", [256, -3, 2]], [-1, 2, \"C3k2\", [512")
        }
    }

    func testBadNames() {
        XCTAssertThrowsError(try load { $0.metadata["names"] = "{\"0\": \"person\"}" }) { error in
            guard case .invalidMetadata(key: "names", _, _)? = error as? ModelError else {
                return XCTFail("expected invalidMetadata(names), got \(error)")
            }
        }
    }

    func testImageSizeOutOfRange() {
        for bad in ["0", "-32", "100000", "9223372036854775807", "big"] {
            assertError(.invalidMetadata(key: "imgsz", value: bad, reason: "not an image size in 32...8192")) {
                $0.metadata["imgsz"] = bad
            }
        }
    }

    func testTaskMustMatchTheHead() {
        assertError(.invalidMetadata(key: "task", value: "pose", reason: "the architecture's head does detect")) {
            $0.metadata["task"] = "pose"
        }
    }

    func testInputShapeErrors() throws {
        let model = try load { _ in }
        for shape in [[1, 3, 100, 64], [2, 3, 64, 64], [1, 4, 64, 64], [3, 64, 64]] {
            XCTAssertThrowsError(try model.network.forward(Tensor(zeros: shape)), "\(shape)") { error in
                guard case .invalidInput(shape: shape, _)? = error as? ModelError else {
                    return XCTFail("expected invalidInput for \(shape), got \(error)")
                }
            }
        }
    }
}

/// Spec values that would overflow or crash later are refused at load.
final class ArchitectureBoundsTests: XCTestCase {
    private func assertInvalid(_ json: String, line: UInt = #line) {
        XCTAssertThrowsError(try { () throws -> Void in
            var weights = RandomWeights()
            _ = try Network(architecture: try Architecture(json: json), weights: &weights)
        }(), line: line) { error in
            XCTAssertNotNil(error as? ModelError, "\(error)", line: line)
        }
    }

    private func spec(_ backbone: String, scales: String = "[0.5, 0.25, 1024]", regMax: Int = 1) -> String {
        """
        {"nc": 2, "reg_max": \(regMax), "end2end": true, "scale": "n", "scales": {"n": \(scales)},
         "backbone": [\(backbone)], "head": [[[-1], 1, "Detect", ["nc"]]]}
        """
    }

    func testAbsurdValuesAreErrors() {
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]]"#, scales: "[0.5, 1e300, 1024]"))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 4611686018427387904]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 0, 2]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 2, "C3k2", [64, false, 1e300]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "SPPF", [64, 0, 3, true]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "SPPF", [64, 4, 3, true]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]]"#, regMax: 4611686018427387904))
        // 200 · 0.5 = 100 hidden channels cannot be split into 100 / 64 = 1 … fine; 400 → 200 into 3 heads is not.
        assertInvalid(spec(#"[-1, 1, "Conv", [400, 3, 2]], [-1, 1, "C2PSA", [400]]"#, scales: "[0.5, 1.0, 1024]"))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, -1, "C2PSA", [64]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 65, "C3k2", [64, false, 0.25]]"#))
        // 8 · 0.25 · 0.5 rounds to 0 hidden channels: no empty convolution is built.
        assertInvalid(spec(#"[-1, 1, "Conv", [8, 3, 2]], [-1, 1, "C3k2", [8, false, 0.1]]"#, scales: "[0.5, 1.0, 1024]"))
        // The older families' modules: 32 copies of a stride-64 GhostConv, an even SPP kernel, a
        // Bottleneck with one kernel, a ZeroPad2d of two sides, a transposed conv that does not
        // grow the map s times, a pool or conv padded past its kernel, a repeated Concat.
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 64, "GhostConv", [64, 3, 64]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "SPP", [64, [5, 8]]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Bottleneck", [64, true, 1, [3]]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "nn.ZeroPad2d", [[0, 1]]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "nn.ConvTranspose2d", [64, 3, 2, 0]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "nn.MaxPool2d", [2, 2, 2]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2, 4]]"#))
        assertInvalid(spec(#"[-1, 1, "Conv", [64, 3, 2]], [[-1, 0], 4, "Concat", [1]]"#))
    }
}

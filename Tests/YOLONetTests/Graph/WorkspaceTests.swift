import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// One workspace through input sizes and head selections that change (each change is a pass
/// off the plan, finished on the heap, then a new plan) gives the same results as a fresh
/// workspace, bit for bit.
final class WorkspaceTests: XCTestCase {
    func testInputSizesChangingInOneWorkspace() throws {
        try BLAS.load()
        let model = try Model(contentsOf: weightsFile("yolo26n-seg"))
        func input(_ h: Int, _ w: Int) -> Tensor {
            Tensor(shape: [1, 3, h, w], scalars: (0..<(3 * h * w)).map { Float(($0 * 7) % 253) / 253 })
        }
        let ws = Workspace()
        let selections = [HeadSelection(), HeadSelection(maxDetections: 2000, agnostic: true), HeadSelection(maxDetections: 2000)]
        for (h, w, s) in [(256, 320, 0), (320, 320, 0), (256, 320, 0), (256, 320, 0), (128, 96, 0), (320, 320, 0),
                          (320, 320, 1), (320, 320, 2), (320, 320, 1), (320, 320, 0), (320, 320, 2)] {
            let x = input(h, w)
            let expected = try model.network.forward(x, selection: selections[s])
            let head = HeadOutput(try model.network.forward(x, in: ws, selection: selections[s]))
            // (Not XCTAssertEqual: it would print every scalar.)
            XCTAssertTrue(head.output == expected.output, "\(h)×\(w), selection \(s): output")
            XCTAssertTrue(head.protos == expected.protos, "\(h)×\(w), selection \(s): prototypes")
            XCTAssertTrue(head.raw == expected.raw, "\(h)×\(w), selection \(s): raw maps")
        }
    }

    /// Every input of a Concat is written in place by its layer (the layer just before into the
    /// front, earlier ones into their parts): the Concats copy nothing, and hold what their inputs
    /// held when they ran. yolo26n and yolo11n, and a spec whose Concat reads two earlier layers.
    func testConcatInputsWrittenInPlace() throws {
        let spec = """
            {"nc": 2, "reg_max": 1, "end2end": true, "scale": "n", "scales": {"n": [0.5, 0.25, 1024]},
             "backbone": [[-1, 1, "Conv", [64, 3, 2]], [-1, 1, "Conv", [64, 3, 1]], [-1, 1, "Conv", [64, 1, 1]],
                          [-1, 1, "Conv", [64, 3, 1]], [[-1, 1, 0], 1, "Concat", [1]], [-1, 1, "Conv", [64, 3, 2]]],
             "head": [[[-1], 1, "Detect", ["nc"]]]}
            """
        var weights = RandomWeights()
        let networks = [("yolo26n", try Model(contentsOf: weightsFile("yolo26n")).network),
                        ("yolo11n", try Model(contentsOf: weightsFile("yolo11n")).network),
                        ("three-input Concat", try Network(architecture: try Architecture(json: spec), weights: &weights))]
        for (name, network) in networks {
            var maps = [Int: Map](), copies = [Int: [Float]]()
            let x = Tensor(shape: [1, 3, 128, 128], scalars: (0..<(3 * 128 * 128)).map { Float($0 % 251) / 251 })
            _ = try network.forward(x, in: Workspace()) { i, map in
                maps[i] = map
                copies[i] = Array(UnsafeBufferPointer(start: map.base, count: map.count))
            }
            // The head's Concats of an upsampled map do not run: the C3k2 after each reads their inputs.
            let concats = network.nodes.indices.filter { network.nodes[$0].type == "Concat" && maps[$0] != nil }
            XCTAssertFalse(concats.isEmpty, name)
            for i in concats {
                var channel = 0
                for j in network.nodes[i].from {
                    XCTAssertEqual(maps[j]!.base, maps[i]!.base + channel * maps[i]!.plane, "\(name): layer \(j) in Concat \(i)")
                    channel += maps[j]!.channels
                }
                XCTAssertTrue(copies[i]! == network.nodes[i].from.flatMap { copies[$0]! }, "\(name): Concat \(i)'s values")
            }
        }
    }
}

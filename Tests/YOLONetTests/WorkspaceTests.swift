import Foundation
import Tensor
import XCTest
import YOLONet

/// One workspace through input sizes and head selections that change (each change is a pass
/// off the plan, finished on the heap, then a new plan) gives the same results as a fresh
/// workspace, bit for bit.
final class WorkspaceTests: XCTestCase {
    func testInputSizesChangingInOneWorkspace() throws {
        try BLAS.load()
        let model = try Model(contentsOf: weightsURL("yolo26n-seg"))
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
}

import Foundation
import Tensor
import XCTest
import YOLONet

/// One workspace through input sizes that change (each change is a pass off the plan, on the
/// heap, then a new plan) gives the same results as a fresh workspace, bit for bit.
final class WorkspaceTests: XCTestCase {
    func testInputSizesChangingInOneWorkspace() throws {
        try BLAS.load()
        let model = try Model(contentsOf: weightsURL("yolo26n-seg"))
        func input(_ h: Int, _ w: Int) -> Tensor {
            Tensor(shape: [1, 3, h, w], scalars: (0..<(3 * h * w)).map { Float(($0 * 7) % 253) / 253 })
        }
        let ws = Workspace()
        for (h, w) in [(256, 320), (320, 320), (256, 320), (256, 320), (128, 96), (320, 320)] {
            let x = input(h, w)
            let expected = try model.network.forward(x)
            let head = HeadOutput(try model.network.forward(x, in: ws))
            XCTAssertEqual(head.output, expected.output, "\(h)×\(w)")
            XCTAssertEqual(head.protos, expected.protos, "\(h)×\(w) prototypes")
            XCTAssertEqual(head.raw, expected.raw, "\(h)×\(w) raw maps")
        }
    }
}

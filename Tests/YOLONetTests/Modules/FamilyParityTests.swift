import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// Parity with Ultralytics 8.4.190 for every architecture family and task, on tiny graphs built
/// from the package's YAML files (`scripts/make-family-fixtures`, `Tests/Fixtures/families`): the
/// weight file is written from the fixture's header and the formula both sides compute
/// (`FamilyFixtures.weights`), loaded through the safetensors reader and run on the fixture's
/// input; `output.0` (and the prototypes) agree within 1e-4 · max(1, max |ref|), as `ParityTests`.
final class FamilyParityTests: XCTestCase {
    static let directory = FamilyFixtures.directory

    /// The fixtures, each with a test method below.
    static let families = [
        "yolov3", "yolov3-tiny", "yolov3-spp", "yolov5", "yolov5-p6", "yolov6", "yolov8", "yolov8-p2",
        "yolov8-p6", "yolov8-ghost", "yolov8-ghost-p2", "yolov8-ghost-p6", "yolov8-seg", "yolov8-seg-p6", "yolov8-pose", "yolov8-pose-p6",
        "yolov8-obb", "yolov8-cls", "yolov9t", "yolov9s", "yolov9m", "yolov9c", "yolov9e", "yolov9c-seg",
        "yolov9e-seg", "yolov10n", "yolov10s", "yolov10m", "yolov10b", "yolov10l", "yolov10x", "yolo11",
        "yolo11-seg", "yolo11-pose", "yolo11-obb", "yolo11-cls", "yolo12", "yolo12-seg", "yolo12-pose", "yolo12-obb",
        "yolo12-cls", "yolo26-p2", "yolo26-p6",
    ]

    func testEveryFixtureIsListed() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.directory.path)
            .filter { $0.hasSuffix(".json") && !$0.hasSuffix(".results.json") }.map { String($0.dropLast(".json".count)) }
        XCTAssertEqual(Set(names), Set(Self.families))
    }

    private func check(_ name: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try Model(file: try SafeTensorsFile(data: try FamilyFixtures.weights(name), source: name + ".json"))
        let input = try SafeTensorsFile(contentsOf: Self.directory.appendingPathComponent("input.safetensors")).tensor("input")
        let ref = try SafeTensorsFile(contentsOf: Self.directory.appendingPathComponent(name + ".reference.safetensors"))
        let output = try model.network.forward(input)
        var results = [Comparison]()
        func compare(_ what: String, _ error: Float, _ expected: Tensor) {
            results.append(Comparison(name: what, error: error, bound: 1e-4 * max(1, maxAbs(expected))))
        }
        let expected = try ref.tensor(ref.entries["output.0"] != nil ? "output.0" : "output.0.0")
        compare("output.0", expected.rank == 3 && model.architecture.endToEnd
            ? maxRowDifference(output.output, expected, file: file, line: line)
            : maxAbsDifference(output.output, expected, "\(name) output.0", file: file, line: line), expected)
        XCTAssertEqual(output.protos != nil, ref.entries["output.0.1"] != nil, "\(name): prototypes", file: file, line: line)
        if let protos = output.protos, ref.entries["output.0.1"] != nil {
            let expected = try ref.tensor("output.0.1")
            compare("prototypes", maxAbsDifference(protos, expected, "\(name) prototypes", file: file, line: line), expected)
        }
        if let message = divergence(results) { XCTFail("\(name): \(message)", file: file, line: line) }
        print("family parity \(name): " + results.map { "\($0.name) \($0.error) (bound \($0.bound))" }.joined(separator: "; "))
    }

    func test_yolov3() throws { try check("yolov3") }
    func test_yolov3_tiny() throws { try check("yolov3-tiny") }
    func test_yolov3_spp() throws { try check("yolov3-spp") }
    func test_yolov5() throws { try check("yolov5") }
    func test_yolov5_p6() throws { try check("yolov5-p6") }
    func test_yolov6() throws { try check("yolov6") }
    func test_yolov8() throws { try check("yolov8") }
    func test_yolov8_p2() throws { try check("yolov8-p2") }
    func test_yolov8_p6() throws { try check("yolov8-p6") }
    func test_yolov8_ghost() throws { try check("yolov8-ghost") }
    func test_yolov8_ghost_p2() throws { try check("yolov8-ghost-p2") }
    func test_yolov8_ghost_p6() throws { try check("yolov8-ghost-p6") }
    func test_yolov8_seg() throws { try check("yolov8-seg") }
    func test_yolov8_seg_p6() throws { try check("yolov8-seg-p6") }
    func test_yolov8_pose() throws { try check("yolov8-pose") }
    func test_yolov8_pose_p6() throws { try check("yolov8-pose-p6") }
    func test_yolov8_obb() throws { try check("yolov8-obb") }
    func test_yolov8_cls() throws { try check("yolov8-cls") }
    func test_yolov9t() throws { try check("yolov9t") }
    func test_yolov9s() throws { try check("yolov9s") }
    func test_yolov9m() throws { try check("yolov9m") }
    func test_yolov9c() throws { try check("yolov9c") }
    func test_yolov9e() throws { try check("yolov9e") }
    func test_yolov9c_seg() throws { try check("yolov9c-seg") }
    func test_yolov9e_seg() throws { try check("yolov9e-seg") }
    func test_yolov10n() throws { try check("yolov10n") }
    func test_yolov10s() throws { try check("yolov10s") }
    func test_yolov10m() throws { try check("yolov10m") }
    func test_yolov10b() throws { try check("yolov10b") }
    func test_yolov10l() throws { try check("yolov10l") }
    func test_yolov10x() throws { try check("yolov10x") }
    func test_yolo11() throws { try check("yolo11") }
    func test_yolo11_seg() throws { try check("yolo11-seg") }
    func test_yolo11_pose() throws { try check("yolo11-pose") }
    func test_yolo11_obb() throws { try check("yolo11-obb") }
    func test_yolo11_cls() throws { try check("yolo11-cls") }
    func test_yolo12() throws { try check("yolo12") }
    func test_yolo12_seg() throws { try check("yolo12-seg") }
    func test_yolo12_pose() throws { try check("yolo12-pose") }
    func test_yolo12_obb() throws { try check("yolo12-obb") }
    func test_yolo12_cls() throws { try check("yolo12-cls") }
    func test_yolo26_p2() throws { try check("yolo26-p2") }
    func test_yolo26_p6() throws { try check("yolo26-p6") }
}

import Foundation
import TestSupport
import XCTest
import YOLOCore

/// `YOLO.val` on coco8 against Ultralytics 8.4.190.
///
/// References made with (coco8.yaml: Ultralytics' own, `path` set to ../shared/datasets/coco8):
///     from ultralytics import YOLO
///     r = YOLO("../shared/weights/MODEL-w8.pt").val(data="coco8.yaml", split=SPLIT, batch=BATCH,
///                                                    imgsz=640, plots=False, device="cpu")
///     r.box.mp, r.box.mr, r.box.map50, r.box.map
/// The installed torchvision was a CUDA build beside a CPU torch, so the run had a stand-in
/// `torchvision.ops.nms` on the path: torchvision's CPU algorithm (stable descending sort, greedy,
/// suppress IoU > threshold) in PyTorch.
final class ValidationTests: XCTestCase {
    struct Reference {
        let model: String, split: String, batch: Int
        let precision, recall, mAP50, mAP50to95: Double
    }

    static let references = [
        Reference(model: "yolo26n", split: "val", batch: 1, precision: 0.8194581030436185, recall: 0.6653728301486265,
                  mAP50: 0.9223076923076924, mAP50to95: 0.6528612590110267),
        Reference(model: "yolo26n", split: "val", batch: 16, precision: 0.8779932804255761, recall: 0.6513425664130909,
                  mAP50: 0.9056972789115646, mAP50to95: 0.6815873788909502),
        Reference(model: "yolo26n", split: "train", batch: 1, precision: 0.7367940738279283, recall: 0.7857142857142857,
                  mAP50: 0.9296938775510204, mAP50to95: 0.8412329931972788),
        Reference(model: "yolo26n", split: "train", batch: 16, precision: 0.7522650476227101, recall: 0.7857142857142857,
                  mAP50: 0.9296938775510204, mAP50to95: 0.826795186559472),
        Reference(model: "yolo11n", split: "val", batch: 1, precision: 0.5405628926807791, recall: 0.85,
                  mAP50: 0.8014694409678765, mAP50to95: 0.6135571706696862),
        Reference(model: "yolo11n", split: "val", batch: 16, precision: 0.5589126107394515, recall: 0.85,
                  mAP50: 0.8463189791006528, mAP50to95: 0.630843018977369),
        Reference(model: "yolo11n", split: "train", batch: 1, precision: 0.914654533378618, recall: 0.8101113865606088,
                  mAP50: 0.9711904761904762, mAP50to95: 0.8615714285714283),
        Reference(model: "yolo11n", split: "train", batch: 16, precision: 0.9051783651511609, recall: 0.8126151900095587,
                  mAP50: 0.9711904761904762, mAP50to95: 0.8645476190476188),
    ]

    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = try ImageFixtures.temporaryDirectory()
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: scratch)
    }

    static func model(_ name: String) throws -> YOLO {
        try YOLO(contentsOf: weightsFile(name))
    }

    /// coco8.yaml as Ultralytics ships it, with `path` at the shared copy and names as a map.
    static func coco8YAML(in directory: URL, names: [String]) throws -> URL {
        let yaml = directory.appendingPathComponent("coco8.yaml")
        try ("path: \(try sharedFile("datasets/coco8").path)\ntrain: images/train\nval: images/val\ntest:\nnames:\n"
            + names.enumerated().map { "  \($0.offset): \($0.element)\n" }.joined()).write(to: yaml, atomically: true, encoding: .utf8)
        return yaml
    }

    func testCoco8MatchesUltralytics() async throws {
        for name in ["yolo26n", "yolo11n"] {
            let model = try Self.model(name)
            let yaml = try Self.coco8YAML(in: scratch, names: model.names)
            for reference in Self.references where reference.model == name {
                let r = try await model.val(data: yaml.path, split: reference.split, batch: reference.batch)
                let label = "\(name) \(reference.split) batch \(reference.batch)"
                print("\(label): P \(r.precision) R \(r.recall) mAP50 \(r.mAP50) mAP50-95 \(r.mAP50to95)")
                XCTAssertEqual(r.mAP50, reference.mAP50, accuracy: 0.001, label)
                XCTAssertEqual(r.mAP50to95, reference.mAP50to95, accuracy: 0.001, label)
                XCTAssertEqual(r.precision, reference.precision, accuracy: 0.001, label)
                XCTAssertEqual(r.recall, reference.recall, accuracy: 0.001, label)
                XCTAssertEqual(r.images, 4, label)
                XCTAssertEqual(r.dataset.summary, "4 images, 0 backgrounds, 0 corrupt", label)
            }
        }
    }
}

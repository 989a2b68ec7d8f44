import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Data YAML parsing, image and label discovery, and Ultralytics' treatment of broken labels.
final class DatasetTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = try ImageFixtures.temporaryDirectory()
    }

    override func tearDownWithError() throws {
        try FileManager.default.removeItem(at: scratch)
    }

    private func write(_ text: String, _ path: String) throws -> URL {
        let url = scratch.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: url.deletingLastPathComponent(), withIntermediateDirectories: true)
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url
    }

    private func error(_ yaml: String) -> DatasetError? {
        do {
            _ = try Dataset(contentsOf: write(yaml, "bad.yaml"))
            return nil
        } catch {
            return error as? DatasetError
        }
    }

    func testNamesAsListMapOrCount() throws {
        XCTAssertEqual(try Dataset(contentsOf: write("val: images\nnames: [cat, dog]\n", "a.yaml")).names, ["cat", "dog"])
        XCTAssertEqual(try Dataset(contentsOf: write("val: images\nnames:\n  1: dog\n  0: cat\n", "b.yaml")).names, ["cat", "dog"])
        XCTAssertEqual(try Dataset(contentsOf: write("val: images\nnc: 2\n", "c.yaml")).names, ["class_0", "class_1"])
    }

    /// `path` relative to the current directory when it exists there, else to the YAML's folder;
    /// no `path`: the YAML's folder. Splits are relative to the root, '../x' retried as 'x'.
    func testPathResolution() throws {
        let yaml = try write("path: data\ntrain: ../train\nval: images/val\nnames: [a]\n", "sets/d.yaml")
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("sets/data/train"), withIntermediateDirectories: true)
        let d = try Dataset(contentsOf: yaml)
        XCTAssertEqual(d.root.path, scratch.appendingPathComponent("sets/data").standardizedFileURL.path)
        XCTAssertEqual(d.splits["val"]?.map(\.path), [scratch.appendingPathComponent("sets/data/images/val").standardizedFileURL.path])
        XCTAssertEqual(d.splits["train"]?.map(\.path), [scratch.appendingPathComponent("sets/data/train").standardizedFileURL.path])
        let bare = try Dataset(contentsOf: write("val: v\nnames: [a]\n", "sets/e.yaml"))
        XCTAssertEqual(bare.root.path, scratch.appendingPathComponent("sets").standardizedFileURL.path)
    }

    func testBadYAMLGivesTypedErrors() throws {
        guard case .missingKey(_, "val", _)? = error("train: images\nnames: [a]\n") else { return XCTFail("no val") }
        guard case .missingKey(_, "names", _)? = error("val: images\n") else { return XCTFail("no names") }
        guard case .invalidYAML? = error("val: [images\nnames: {a\n") else { return XCTFail("syntax") }
        guard case .invalidYAML? = error("- just\n- a list\n") else { return XCTFail("not a mapping") }
        guard case .invalidValue(_, "names", _)? = error("val: images\nnames:\n  0: a\n  2: b\n") else { return XCTFail("indices") }
        guard case .invalidValue(_, "nc", _)? = error("val: images\nnames: [a]\nnc: 3\n") else { return XCTFail("nc") }
        let message = error("train: images\nnames: [a]\n")?.errorDescription ?? ""
        XCTAssertTrue(message.contains("bad.yaml") && message.contains("'val:'"), message)
        // 'validation' stands in for 'val'.
        XCTAssertNotNil(try Dataset(contentsOf: write("validation: v\nnames: [a]\n", "v.yaml")).splits["val"])
    }

    func testMissingSplitFolderAndEmptySplit() throws {
        let d = try Dataset(contentsOf: write("val: nowhere\nnames: [a]\n", "d.yaml"))
        XCTAssertThrowsError(try d.imageFiles(split: "val")) { error in
            guard case .missingImages(_, "val", let source)? = error as? DatasetError else { return XCTFail("\(error)") }
            XCTAssertTrue(source.hasSuffix("/nowhere"))
        }
        XCTAssertThrowsError(try d.imageFiles(split: "train")) { XCTAssertNotNil($0 as? DatasetError) }
        _ = try write("not an image", "empty/readme.md")
        XCTAssertThrowsError(try Dataset(contentsOf: write("val: empty\nnames: [a]\n", "e.yaml")).imageFiles(split: "val")) {
            guard case .noImages? = $0 as? DatasetError else { return XCTFail("\($0)") }
        }
    }

    /// Folders are searched recursively (links followed, hidden folders not); `.txt` lists resolve
    /// "./x" against the list's folder.
    func testImageListsAndLabelPaths() throws {
        for name in ["images/b/2.jpg", "images/a/1.PNG", "images/notes.txt", "images/.hidden/4.jpg", "elsewhere/3.jpg"] {
            _ = try write("", name)
        }
        try FileManager.default.createSymbolicLink(at: scratch.appendingPathComponent("images/b/3.jpg"),
                                                   withDestinationURL: scratch.appendingPathComponent("elsewhere/3.jpg"))
        let folder = try Dataset(contentsOf: write("val: images\nnames: [a]\n", "f.yaml"))
        XCTAssertEqual(try folder.imageFiles(split: "val").map(\.lastPathComponent), ["1.PNG", "2.jpg", "3.jpg"])
        _ = try write("./images/b/2.jpg\n\n./images/a/1.PNG\n", "list.txt")
        let list = try Dataset(contentsOf: write("val: list.txt\nnames: [a]\n", "g.yaml"))
        XCTAssertEqual(try list.imageFiles(split: "val").map(\.path),
                       ["images/a/1.PNG", "images/b/2.jpg"].map { scratch.appendingPathComponent($0).path })
        XCTAssertEqual(Dataset.labelFile(for: URL(fileURLWithPath: "/d/images/x/images/p.q.jpg")).path, "/d/images/x/labels/p.q.txt")
        XCTAssertEqual(Dataset.labelFile(for: URL(fileURLWithPath: "/d/pics/p.png")).path, "/d/pics/p.txt")
    }

    /// A split with every kind of bad label, as /tmp/broken was made for the Ultralytics run below:
    /// copies of coco8 val images a…l, labels/val/<name>.txt as listed (no e.txt), f.jpg not an image.
    private func brokenDataset() throws -> URL {
        let coco8 = try sharedFile("datasets/coco8")
        let images = scratch.appendingPathComponent("broken/images/val")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        for name in "abcdeghijkl" {
            let source = name == "d" ? "000000000036" : name == "h" ? "000000000061" : "000000000042"
            try FileManager.default.copyItem(at: coco8.appendingPathComponent("images/val/\(source).jpg"),
                                             to: images.appendingPathComponent("\(name).jpg"))
        }
        _ = try write("not a jpeg", "broken/images/val/f.jpg")
        let label36 = try String(contentsOf: coco8.appendingPathComponent("labels/val/000000000036.txt"), encoding: .utf8)
        let labels: [String: String] = [
            "a": "99 0.5 0.5 0.2 0.2\n",                       // class out of range
            "b": "16 1.5 0.5 0.2 0.2\n",                       // coordinate outside 0…1.01
            "c": "16 0.5 0.5 0.2 0.2 0.9\n",                   // 6 columns
            "d": label36 + label36.split(separator: "\n")[0] + "\n",  // a duplicate of the first row
            "f": "16 0.5 0.5 0.2 0.2\n",                       // beside an unreadable image
            "g": "",                                           // empty: a background
            "h": try String(contentsOf: coco8.appendingPathComponent("labels/val/000000000061.txt"), encoding: .utf8),
            "i": "16 0.5 -0.5 0.2 0.2\n",                      // negative
            "j": "1.5 0.5 0.5 0.2 0.2\n",                      // fractional class
            "k": "16 0.5 abc 0.2 0.2\n",                       // not a number
            "l": "16 0.5 0.5 0.2 0.2\n16 0.5 0.5 0.2\n",       // ragged rows
        ]
        for (name, text) in labels { _ = try write(text, "broken/labels/val/\(name).txt") }
        let names = try ValidationTests.model("yolo26n").names
        return try write("path: broken\nval: images/val\nnames: [\(names.joined(separator: ", "))]\n", "broken.yaml")
    }

    /// Ultralytics 8.4.190 on that split: "10 images, 2 backgrounds, 8 corrupt", a duplicate
    /// removed from d, and per model (batch 16)
    ///     YOLO(MODEL-w8.pt).val(data="broken.yaml", split="val", batch=16, imgsz=640)
    /// yolo26n mAP50 0.8204385964912282, mAP50-95 0.5933890977443609 (P 0.9146524935796695, R 0.6730353301142075);
    /// yolo11n mAP50 0.7097266313932981, mAP50-95 0.5369171075837741 (P 0.7607922524687067, R 0.657960858749263).
    func testBrokenLabelsCountedAsUltralyticsCountsThem() async throws {
        let yaml = try brokenDataset()
        let (images, scan) = try Dataset(contentsOf: yaml).labeledImages(split: "val")
        XCTAssertEqual(images.map(\.image.lastPathComponent), ["d.jpg", "e.jpg", "g.jpg", "h.jpg"])
        XCTAssertEqual(scan.summary, "10 images, 2 backgrounds, 8 corrupt")
        XCTAssertEqual([scan.found, scan.missing, scan.empty, scan.corrupt], [10, 1, 1, 8])
        let expected = [
            "a.jpg: ignoring corrupt image/label: Label class 99 exceeds dataset class count 80. Possible class labels are 0-79",
            "b.jpg: ignoring corrupt image/label: non-normalized or out of bounds coordinates [1.5]",
            "c.jpg: ignoring corrupt image/label: labels require 5 columns, 6 columns detected",
            "d.jpg: 1 duplicate labels removed",
            "f.jpg: ignoring corrupt image/label: ",
            "i.jpg: ignoring corrupt image/label: negative label values [-0.5]",
            "j.jpg: ignoring corrupt image/label: non-integer class labels [1.5]",
            "k.jpg: ignoring corrupt image/label: could not convert string to float: 'abc'",
            "l.jpg: ignoring corrupt image/label: ",
        ]
        XCTAssertEqual(scan.warnings.count, expected.count, "\(scan.warnings)")
        for (warning, text) in zip(scan.warnings, expected) {
            XCTAssertTrue(warning.hasPrefix(scratch.appendingPathComponent("broken/images/val").path + "/" + text), warning)
        }
        // Duplicates go, the rest sorted as np.unique leaves them: class 0 before class 25.
        XCTAssertEqual(images[0].classes, [0, 25])

        for (name, mAP50, mAP50to95) in [("yolo26n", 0.8204385964912282, 0.5933890977443609),
                                          ("yolo11n", 0.7097266313932981, 0.5369171075837741)] {
            let r = try await ValidationTests.model(name).val(data: yaml.path)
            XCTAssertEqual(r.images, 4)
            XCTAssertEqual(r.instances, 7)
            XCTAssertEqual(r.dataset, scan)
            XCTAssertEqual(r.mAP50, mAP50, accuracy: 0.001, name)
            XCTAssertEqual(r.mAP50to95, mAP50to95, accuracy: 0.001, name)
        }
    }

    /// Only backgrounds: zero metrics and Ultralytics' note, not a failure.
    func testSplitWithoutLabels() async throws {
        let images = scratch.appendingPathComponent("bg/images")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: sharedFile("datasets/coco8/images/val/000000000042.jpg"),
                                         to: images.appendingPathComponent("x.jpg"))
        let yaml = try write("path: bg\nval: images\nnc: 80\n", "bg.yaml")
        let r = try await ValidationTests.model("yolo26n").val(data: yaml.path)
        XCTAssertEqual(r.dataset.summary, "0 images, 1 backgrounds, 0 corrupt")
        XCTAssertEqual([r.images, r.instances], [1, 0])
        XCTAssertEqual([r.precision, r.recall, r.mAP50, r.mAP50to95], [0, 0, 0, 0])
        XCTAssertEqual(r.classes, [])
        XCTAssertEqual(r.notes, ["no labels found in the val split, cannot compute metrics without labels"])
    }

    /// Labels of classes the model lacks are skipped; an image with more labels than the default
    /// max_det raises it (Ultralytics' `_check_max_det`).
    func testExtraClassesSkippedAndMaxDetRaised() async throws {
        let images = scratch.appendingPathComponent("many/images")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: sharedFile("datasets/coco8/images/val/000000000042.jpg"),
                                         to: images.appendingPathComponent("x.jpg"))
        let rows = (0..<301).map { "0 \(0.01 + Double($0 % 20) * 0.049) \(0.01 + Double($0 / 20) * 0.06) 0.01 0.01" } + ["80 0.5 0.5 0.2 0.2"]
        _ = try write(rows.joined(separator: "\n") + "\n", "many/labels/x.txt")
        let yaml = try write("path: many\nval: images\nnc: 81\n", "many.yaml")
        let r = try await ValidationTests.model("yolo26n").val(data: yaml.path)
        XCTAssertEqual(r.instances, 301)
        XCTAssertEqual(r.notes, ["the model has 80 classes and the dataset 81: labels of classes 80 and up are skipped",
                                 "images have up to 301 labels, more than max_det=300; max_det raised to 301"])
    }

    /// Every image corrupt: an error listing why, not a crash or empty metrics.
    func testNoValidImages() throws {
        _ = try write("not a jpeg", "bad/images/x.jpg")
        let d = try Dataset(contentsOf: write("path: bad\nval: images\nnames: [a]\n", "bad.yaml"))
        XCTAssertThrowsError(try d.labeledImages(split: "val")) { error in
            guard case .noValidImages(_, let problems)? = error as? DatasetError else { return XCTFail("\(error)") }
            XCTAssertEqual(problems.count, 1)
            XCTAssertTrue(problems[0].contains("x.jpg: ignoring corrupt image/label"), problems[0])
        }
    }
}

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

    /// Hostile label values are corrupt labels, as Ultralytics' `verify_image_label` finds them,
    /// never a trap: classes inf, 1e30 (once a Float → Int conversion in the message), NaN and
    /// -inf; a polygon beside a row with no points (once `min()!` on no coordinates); a label file
    /// that never ends. Messages end with the line they are about. A folder in a label's place is no label, as `os.path.isfile` has it.
    func testHostileLabelValuesAreCorrupt() throws {
        let labels: [(String, String?, String)] = [
            ("inf", "inf 0.5 0.5 0.2 0.2\n", "non-integer class labels [inf] (line 1)"),
            ("huge", "1e30 0.5 0.5 0.2 0.2\n", "Label class 1e+30 exceeds dataset class count 2. Possible class labels are 0-1 (line 1)"),
            ("big", "3000000000 0.5 0.5 0.2 0.2\n", "Label class 3000000000 exceeds dataset class count 2."),
            ("nan", "nan 0.5 0.5 0.2 0.2\n", "negative label values [] (line 1)"),
            ("neginf", "-inf 0.5 0.5 0.2 0.2\n", "negative label values [-inf] (line 1)"),
            ("nanxy", "0 nan 0.5 0.2 0.2\n", "non-normalized or out of bounds coordinates [nan] (line 1)"),
            ("pointless", "0 0.1 0.1 0.2 0.1 0.2 0.2\n\n1\n", "a polygon row has a class and no points (line 3)"),
            ("odd", "0 0.1 0.1 0.2 0.1 0.2 0.2\n1 0.5 0.5 0.5\n", "a polygon row has an odd number (3) of coordinates (line 2)"),
            ("wide", "0 0.5 0.5 0.2 0.2\n" + Array(repeating: "0.5", count: 1001).joined(separator: " "),
             "labels mix segment and detection rows (line 1)"),
            ("long", "0 " + String(repeating: "9", count: 100_000) + "x 0.5 0.2 0.2\n",
             "could not convert string to float: '\(String(repeating: "9", count: 60))…' (line 1)"),
            ("ragged", (1...12).map { Array(repeating: "0", count: $0 % 3 + 1).joined(separator: " ") }.joined(separator: "\n"),
             "rows have different numbers of columns: [2, 3, 1, 2, 3, 1, 2, 3, 1, 2] … (12 values) (line 2)"),
            ("endless", nil, "labels/endless.txt: larger than \(Dataset.maxLabelFileBytes) bytes"),
        ]
        let images = scratch.appendingPathComponent("hostile/images")
        try FileManager.default.createDirectory(at: images, withIntermediateDirectories: true)
        let photo = try sharedFile("datasets/coco8/images/val/000000000042.jpg")
        for (name, text, _) in labels + [("folder", nil, ""), ("good", "1 0.5 0.5 0.2 0.2\n\n   \n", "")] {
            try FileManager.default.copyItem(at: photo, to: images.appendingPathComponent("\(name).jpg"))
            if let text { _ = try write(text, "hostile/labels/\(name).txt") }
        }
        try FileManager.default.createSymbolicLink(atPath: scratch.appendingPathComponent("hostile/labels/endless.txt").path,
                                                   withDestinationPath: "/dev/zero")
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("hostile/labels/folder.txt"),
                                                withIntermediateDirectories: true)
        let d = try Dataset(contentsOf: write("path: hostile\nval: images\nnames: [a, b]\n", "hostile.yaml"))
        let (valid, scan) = try d.labeledImages(split: "val")
        XCTAssertEqual(valid.map(\.image.lastPathComponent), ["folder.jpg", "good.jpg"])
        XCTAssertEqual(valid.map(\.classes), [[], [1]])
        XCTAssertEqual([scan.found, scan.missing, scan.empty, scan.corrupt], [labels.count + 1, 1, 0, labels.count])
        for (name, _, reason) in labels {
            let prefix = images.appendingPathComponent("\(name).jpg").path + ": ignoring corrupt image/label: "
            XCTAssertTrue(scan.warnings.contains { $0.hasPrefix(prefix) && $0.contains(reason) }, "\(name): \(scan.warnings)")
        }
    }

    /// Distinct polygons that share a class and box are no duplicates: Ultralytics 8.4.190 keeps
    /// them, and orders what it keeps by the polygons' float32 bytes (class 2 before class 1).
    /// Python reference: `verify_image_label`'s `np.unique` steps on these rows give classes [2, 1, 1].
    func testDistinctPolygonsSharingABoxAreKept() throws {
        let rows = ["1 0.1 0.1 0.3 0.1 0.3 0.3 0.1 0.3", "2 0.5 0.5 0.7 0.5 0.7 0.7", "1 0.1 0.1 0.3 0.1 0.1 0.3 0.3 0.3"]
        let (kept, removed) = try labelRows((rows + [rows[1]]).joined(separator: "\n"), classCount: 3)
        XCTAssertEqual(kept.map { $0[0] }, [2, 1, 1])
        XCTAssertEqual(removed, 1)
        let (all, none) = try labelRows(rows.joined(separator: "\n"), classCount: 3)
        XCTAssertEqual(all.map { $0[0] }, [1, 2, 1], "no polygon repeated: the file's order")
        XCTAssertEqual(none, 0)
    }

    /// A "billion laughs" data YAML (~600 bytes standing for 387 million strings, hours to hash
    /// as a key and gigabytes to expand) is refused at once; the tracker YAML shares the reader.
    func testAliasBombRefusedQuickly() throws {
        let bomb = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
            + zip("abcdefgh", "bcdefghi").map { a, b in "\(b): &\(b) [" + Array(repeating: "*\(a)", count: 9).joined(separator: ", ") + "]\n" }.joined()
        let start = Date()
        for yaml in [bomb + "val: images\nnames: *i\n", bomb + "? *i\n: 1\nval: images\nnc: 2\n"] {
            guard case .invalidYAML(_, let reason)? = error(yaml) else { return XCTFail("no error for the bomb") }
            XCTAssertTrue(reason.contains("aliases expand it to more than 1000000 nodes"), reason)
        }
        XCTAssertThrowsError(try TrackerConfiguration(yaml: bomb + "? *i\n: 1\n")) { error in
            guard case .invalidYAML(_, let reason)? = error as? TrackerConfigurationError else { return XCTFail("\(error)") }
            XCTAssertTrue(reason.contains("alias"), reason)
        }
        XCTAssertLessThan(Date().timeIntervalSince(start), 2, "refused before expanding")
        // Anchors and aliases within the bound stay shared and usable.
        let shared = try Dataset(contentsOf: write("v: &v images\nval: *v\ntrain: [*v, other]\nnames: &n [a, b]\nmore: [*n, *n]\n", "ok.yaml"))
        XCTAssertEqual(shared.names, ["a", "b"])
        XCTAssertEqual(shared.splits["train"]?.map(\.lastPathComponent), ["images", "other"])
    }

    /// Class counts and names beyond `Dataset.maxClasses` or no whole number are errors naming
    /// the value, not a billion-entry table or a trap (nc 1e300 or .inf, a base-60 int Yams would
    /// overflow, names that are lists); files that never end are read no further than a bound.
    func testAbsurdClassCountsAndNames() throws {
        func reason(_ yaml: String, key: String) -> String {
            guard case .invalidValue(_, key, let reason)? = error("val: images\n" + yaml) else { return "no \(key) error" }
            return reason
        }
        for value in ["1000000000", "-1", "0", "1e300", "99999999999999999999999"] {
            XCTAssertEqual(reason("nc: \(value)\n", key: "nc"), "'\(value)' is out of range: a dataset has 1 to 100000 classes")
        }
        for value in [".inf", "-.inf", ".nan", "1.5", "many", "1:0:0:0:0:0:0:0:0:0:0:0:0"] {
            XCTAssertEqual(reason("nc: \(value)\n", key: "nc"), "must be an integer, not '\(value)'")
        }
        XCTAssertEqual(reason("nc: [1]\n", key: "nc"), "must be an integer, not a list")
        XCTAssertEqual(reason("nc: \(String(repeating: "x", count: 100_000))\n", key: "nc"),
                       "must be an integer, not '\(String(repeating: "x", count: 60))…'", "long values cut")
        XCTAssertEqual(try Dataset(contentsOf: write("val: images\nnc: '3'\n", "three.yaml")).names.count, 3)
        let many = "names: [" + Array(repeating: "x", count: Dataset.maxClasses + 1).joined(separator: ",") + "]\n"
        XCTAssertEqual(reason(many, key: "names"), "100001 names, more than the 100000 classes a dataset may have")
        XCTAssertEqual(reason("names: [a, [b, c]]\n", key: "names"), "class 1 is a list, not a name")
        XCTAssertEqual(reason("names: {0: a, 99999999999999999999: b}\n", key: "names"),
                       "class index '99999999999999999999' is not an integer")
        XCTAssertEqual(reason("names: {0: a, 1000000000: b}\n", key: "names"),
                       "a 2-class dataset needs class indices 0-1, not 0, 1000000000")
        XCTAssertEqual(reason("names: 7\n", key: "names"), "must be a list or a map of class index to name, not '7'")
        XCTAssertEqual(reason("names: [a]\npath: [x]\n", key: "path"), "must be a string, not a list")
        // A data YAML that never ends is refused after its first MiB.
        XCTAssertThrowsError(try Dataset(contentsOf: URL(fileURLWithPath: "/dev/zero"))) { error in
            XCTAssertEqual(error as? DatasetError, .unreadable(path: "/dev/zero", reason: "larger than 1048576 bytes"))
        }
        // So is a list of images that never ends, after 256 MiB.
        try FileManager.default.createSymbolicLink(atPath: scratch.appendingPathComponent("zero.txt").path, withDestinationPath: "/dev/zero")
        XCTAssertThrowsError(try Dataset(contentsOf: write("val: zero.txt\nnames: [a]\n", "zero.yaml")).imageFiles(split: "val")) {
            guard case .unreadable(_, "larger than 268435456 bytes")? = $0 as? DatasetError else { return XCTFail("\($0)") }
        }
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

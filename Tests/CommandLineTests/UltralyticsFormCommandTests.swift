import Foundation
import TestSupport
import XCTest

/// What users of Ultralytics' CLI type: `key=value` arguments, its run folders, crops, frames,
/// drawing and NMS options, `--version`.
final class UltralyticsFormCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch,
                       environment: ["YOLO_WEIGHTS_DIR": try weightsDirectory().path, "YOLO_CACHE_DIR": scratch.path])
    }

    private func contents(_ path: String) throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: scratch.appendingPathComponent(path).path).sorted()
    }

    /// Results without their timings.
    private func records(_ file: String) throws -> [NSDictionary] {
        let array = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent(file))) as? [[String: Any]])
        return array.map { $0.filter { $0.key != "speed_ms" } as NSDictionary }
    }

    func testKeyValueFormMeansWhatTheFlagsMean() throws {
        let bus = try sharedFile("images/bus.jpg").path
        for arguments in [
            ["predict", "--model", "yolo26n", "--source", bus, "--conf", "0.5", "--save-txt", "--save-conf", "--imgsz", "320",
             "--save-json", "flags.json", "--name", "flags"],
            ["predict", "model=yolo26n", "source=" + bus, "conf=0.5", "save_txt=True", "save_conf=True", "imgsz=320",
             "save_json=keys.json", "name=keys"],
            // A task word first, a .pt name, a bare boolean key, a list, lower-case booleans, --options mixed in.
            ["detect", "predict", "model=yolo26n.pt", "source=" + bus, "--conf", "0.5", "save_txt", "save_conf=true",
             "imgsz=[320, 320]", "save_json=task.json", "name=task", "save_crop=false"],
        ] {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)")
            XCTAssertTrue(result.stdout.contains(": 320x256 2 persons, 1 bus, "), result.stdout)
        }
        let flags = try records("flags.json")
        XCTAssertEqual(try records("keys.json"), flags)
        XCTAssertEqual(try records("task.json"), flags)
        let labels = try String(contentsOf: scratch.appendingPathComponent("runs/detect/flags/labels/bus.txt"), encoding: .utf8)
        XCTAssertEqual(labels.split(separator: "\n").map { $0.split(separator: " ").count }, [6, 6, 6], "cls cx cy w h conf")
        for name in ["keys", "task"] {
            XCTAssertEqual(try String(contentsOf: scratch.appendingPathComponent("runs/detect/\(name)/labels/bus.txt"), encoding: .utf8),
                           labels, name)
        }
        XCTAssertEqual(try contents("runs/detect/task"), ["labels"], "save_crop=false saves no crop")
    }

    /// `imgsz=[h, w]`: the image fitted into 320×640 and padded to the stride, as Ultralytics
    /// 8.4.190 gives it (bus.jpg at `imgsz=[320,640]`: a 320x256 input, 4 persons and a bus).
    func testRectangularImageSize() throws {
        let bus = try sharedFile("images/bus.jpg").path
        for arguments in [["predict", "source=" + bus, "imgsz=[320,640]"], ["predict", "--source", bus, "--imgsz", "320,640"]] {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(result.stdout.contains("bus.jpg: 320x256 4 persons, 1 bus, "), result.stdout)
        }
        let small = try yolo(["predict", "--source", bus, "--imgsz", "16,640"])
        XCTAssertEqual(small.stderr, "Error: configuration imageShape = [16, 640] is invalid: must be [height, width], each in 32…8192\n")
        let classify = try yolo(["predict", "--model", "yolo26n-cls", "--source", bus, "--imgsz", "224,320"])
        XCTAssertEqual(classify.stderr, "Error: configuration imageShape = [224, 320] is invalid: a classify model's input is square: give one size\n")
        XCTAssertEqual(try yolo(["predict", "--source", bus, "--imgsz", "320,x"]).status, 64)
    }

    func testUnknownKeysAndBadValuesAreOneLineErrors() throws {
        let unknown = try yolo(["predict", "model=yolo26n", "sorce=bus.jpg"])
        XCTAssertEqual(unknown.status, 64)
        let line = try XCTUnwrap(unknown.stderr.split(separator: "\n").first)
        XCTAssertTrue(line.hasPrefix("Error: 'sorce' is not a valid argument of yolo predict; valid: agnostic_nms, "), String(line))
        for key in ["source", "save_crop", "show_labels", "hide_labels", "exist_ok", "line_width"] {
            XCTAssertTrue(line.contains(" \(key),") || line.hasSuffix(" \(key)"), "\(key) in \(line)")
        }
        let val = try yolo(["val", "model=yolo26n", "data=coco8.yaml", "device=cpu"])
        XCTAssertTrue(val.stderr.hasPrefix("Error: 'device' is not a valid argument of yolo val; valid: batch, conf, data, "), val.stderr)
        for (arguments, message) in [
            (["predict", "source=bus.jpg", "save_txt=yes"], "'save_txt=yes': save_txt is True or False"),
            (["predict", "source=bus.jpg", "conf"], "'conf' needs a value: conf=…"),
            (["val", "data=coco8.yaml", "save_json=True"], "'save_json=True': save_json takes a value here, not True or False (see yolo val --help)"),
            (["model=yolo26n", "source=bus.jpg"], "give a verb first: predict, track, solutions, val, export, dump"),
        ] {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 64, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix("Error: \(message)"), "\(arguments): \(result.stderr)")
        }
    }

    func testVersion() throws {
        for arguments in [["--version"], ["version"]] {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 0)
            XCTAssertEqual(result.stdout, "yolo-swift 0.1.0 (Ultralytics 8.4.190 results)\n")
        }
    }

    /// runs/<task>/<verb> and --exist-ok, as Ultralytics 8.4.190 names them (predict, predict-2
    /// and the project placement are in PredictCommandTests and OutputPathCommandTests).
    func testRunFoldersFollowTheTaskAndTheVerb() throws {
        let bus = try sharedFile("images/bus.jpg").path
        for arguments in [["predict", "save_txt=True"], ["predict", "save_txt=True", "exist_ok=True"], ["track", "--save-txt"],
                          ["predict", "--model", "yolo26n-cls", "--save-txt"], ["predict", "--model", "yolo26n-seg", "--save-txt", "--task", "detect"]] {
            let result = try yolo(arguments + ["source=" + bus, "imgsz=64"])
            XCTAssertEqual(result.status, 0, "\(arguments): \(result.stderr)")
        }
        XCTAssertEqual(try contents("runs"), ["classify", "detect"])
        XCTAssertEqual(try contents("runs/detect"), ["predict", "predict-2", "track"], "exist_ok reuses predict")
        XCTAssertEqual(try contents("runs/classify"), ["predict"])
    }

    /// Crops as Ultralytics 8.4.190 writes them for the same command (`yolo predict
    /// model=yolo26n-w8.pt source=bus.jpg save_crop=True`): the same files, of its sizes, JPEG
    /// without chroma subsampling.
    func testSaveCropWritesUltralyticsCrops() throws {
        let result = try yolo(["predict", "source=" + (try sharedFile("images/bus.jpg").path), "save_crop=True"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let crops = "runs/detect/predict/crops"
        XCTAssertEqual(try contents("runs/detect/predict"), ["crops"])
        var sizes = [String: [Int]]()
        for folder in try contents(crops) {
            for file in try contents(crops + "/" + folder) {
                let data = try Data(contentsOf: scratch.appendingPathComponent("\(crops)/\(folder)/\(file)"))
                // The start of frame: precision, height, width, 3 components of id, sampling 1×1, table.
                let sof = try XCTUnwrap(data.firstRange(of: Data([0xFF, 0xC0]))).lowerBound
                let header = [UInt8](data[(sof + 4)..<(sof + 19)])
                sizes["\(folder)/\(file)"] = [Int(header[3]) << 8 | Int(header[4]), Int(header[1]) << 8 | Int(header[2])]
                XCTAssertEqual([header[7], header[10], header[13]], [0x11, 0x11, 0x11], "4:4:4 \(file)")
            }
        }
        XCTAssertEqual(sizes, ["bus/bus.jpg": [810, 552], "person/bus.jpg": [135, 471], "person/bus-2.jpg": [205, 520],
                               "person/bus-3.jpg": [145, 504], "person/bus-4.jpg": [65, 332]])
        let classify = try yolo(["predict", "model=yolo26n-cls", "source=" + (try sharedFile("images/bus.jpg").path), "save_crop=True"])
        XCTAssertEqual(classify.status, 1)
        XCTAssertEqual(classify.stderr, "Error: --save-crop cuts boxes: classify results have none\n")
    }

    /// A video's annotated frames as <stem>_frames/<stem>_<n>.jpg, without the video unless
    /// --save; images have no frames to save.
    func testSaveFrames() throws {
        let image = try yolo(["predict", "source=" + (try sharedFile("images/bus.jpg").path), "imgsz=64", "save_frames=True"])
        XCTAssertEqual(image.status, 0, image.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("runs").path))
        let result = try yolo(["predict", "source=" + (try sharedFile("videos/pan.mp4").path), "vid_stride=50", "imgsz=64", "save_frames=True"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try contents("runs/detect/predict"), ["pan_frames"])
        XCTAssertEqual(try contents("runs/detect/predict/pan_frames"), ["pan_1.jpg", "pan_2.jpg", "pan_3.jpg"])
    }

    /// `show_labels=False` and the others draw as their `--hide-…` flags, and not as the default.
    func testDrawingOptionsInBothForms() throws {
        let bus = try sharedFile("images/bus.jpg").path
        func saved(_ options: [String], _ name: String) throws -> Data {
            let result = try yolo(["predict", "--source", bus, "--imgsz", "320", "--save", "--name", name] + options)
            XCTAssertEqual(result.status, 0, "\(options): \(result.stderr)")
            return try Data(contentsOf: scratch.appendingPathComponent("runs/detect/\(name)/bus.jpg"))
        }
        let plain = try saved([], "plain")
        for (keys, flags) in [(["show_labels=False", "line_width=1"], ["--hide-labels", "--line-width", "1"]),
                              (["show_conf=False", "show_labels=False"], ["--hide-conf", "--hide-labels"]),
                              (["show_boxes=False"], ["--hide-boxes"]), (["hide_labels=True"], ["--hide-labels"]),
                              (["boxes=False", "--show-boxes"], ["--show-boxes"])] {
            let drawn = try saved(keys, "keys")
            XCTAssertEqual(drawn, try saved(flags, "flags"), "\(keys)")
            XCTAssertEqual(drawn == plain, keys.first == "boxes=False", "\(keys) against the default drawing")
            try FileManager.default.removeItem(at: scratch.appendingPathComponent("runs/detect/keys"))
            try FileManager.default.removeItem(at: scratch.appendingPathComponent("runs/detect/flags"))
        }
    }

    /// --agnostic-nms as Ultralytics 8.4.190's `agnostic_nms=True`: yolo11n on zidane.jpg at conf
    /// 0.01 and IoU 0.3 keeps 24 boxes per class and 21 across classes.
    func testAgnosticNMS() throws {
        let zidane = try sharedFile("images/zidane.jpg").path
        for (options, count) in [([String](), 24), (["--agnostic-nms"], 21), (["agnostic_nms=True"], 21)] {
            let result = try yolo(["predict", "--model", "yolo11n", "--source", zidane, "--conf", "0.01", "--iou", "0.3",
                                   "--save-json", "out.json"] + options)
            XCTAssertEqual(result.status, 0, result.stderr)
            let boxes = try XCTUnwrap(try records("out.json").first?["boxes"] as? [String: Any])
            XCTAssertEqual((boxes["cls"] as? [Int])?.count, count, "\(options)")
        }
    }
}

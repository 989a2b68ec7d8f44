import Foundation
import TestSupport
import XCTest

/// `yolo predict` and `yolo dump` run as a user would run them.
final class PredictCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    func yolo(_ arguments: [String]) throws -> CommandResult {
        let weights = try weightsDirectory()
        return try runCommand(executable, arguments, in: scratch,
                              environment: ["YOLO_WEIGHTS_DIR": weights.path, "YOLO_CACHE_DIR": scratch.path])
    }

    func testPredictPrintsSavesLabelsAndJSON() throws {
        let images = try sharedFile("images/bus.jpg").deletingLastPathComponent()
        let result = try yolo(["predict", "--model", "yolo26n", "--source", images.path + "/[bz][ui]*.jpg",
                               "--save", "--save-txt", "--save-json", "out.json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("image 1/2 \(images.path)/bus.jpg: 640x480 4 persons, 1 bus, "), result.stdout)
        XCTAssertTrue(result.stdout.contains("image 2/2 \(images.path)/zidane.jpg: 384x640 2 persons, 1 tie, "), result.stdout)
        let run = scratch.appendingPathComponent("runs/detect/predict")
        XCTAssertTrue(FileManager.default.fileExists(atPath: run.appendingPathComponent("bus.jpg").path))
        let labels = try String(contentsOf: run.appendingPathComponent("labels/bus.txt"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: " ") }
        XCTAssertEqual(labels.count, 5)
        XCTAssertTrue(labels.allSatisfy { $0.count == 5 }, "cls cx cy w h, without --save-conf")
        XCTAssertEqual(labels.map { $0[0] }, ["0", "0", "5", "0", "0"])
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("out.json")))
            as? [[String: Any]])
        XCTAssertEqual(json.map { $0["image"] as? String }, ["bus.jpg", "zidane.jpg"])
        XCTAssertEqual(json[0]["orig_shape"] as? [Int], [1080, 810])
        XCTAssertEqual((json[0]["boxes"] as? [String: Any])?["cls"] as? [Int], [0, 0, 5, 0, 0])
        // A second run goes to predict-2, as Ultralytics 8.4.190 numbers it.
        XCTAssertEqual(try yolo(["predict", "--source", images.appendingPathComponent("bus.jpg").path, "--save"]).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("runs/detect/predict-2/bus.jpg").path))
    }

    /// A folder or a pattern runs its images and videos in natural order, as `YOLOSession` does;
    /// a folder or pattern with none, or a path that does not exist, is a one-line error.
    func testFolderAndPatternInNaturalOrder() throws {
        let folder = scratch.appendingPathComponent("frames")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in ["img10.jpg", "img2.JPG", "img1.jpg"] {
            try FileManager.default.copyItem(at: try sharedFile("images/bus.jpg"), to: folder.appendingPathComponent(name))
        }
        try Data("notes".utf8).write(to: folder.appendingPathComponent("img3.txt"))
        for source in [folder.path, folder.path + "/img*"] {
            let result = try yolo(["predict", "--model", "yolo26n", "--imgsz", "64", "--source", source, "--save-json", "out.json"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertEqual(try json("out.json").map { $0["image"] as? String }, ["img1.jpg", "img2.JPG", "img10.jpg"], source)
        }
        let empty = scratch.appendingPathComponent("empty")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        for (source, message) in [(empty.path, "cannot open \(empty.path): the directory holds no image or video"),
                                  (folder.path + "/*.txt", "cannot open \(folder.path)/*.txt: no image or video among the files the pattern matches"),
                                  (folder.path + "/none*", "cannot open \(folder.path)/none*: no file matches the pattern"),
                                  (folder.path + "/none.jpg", "source \(folder.path)/none.jpg does not exist")] {
            let result = try yolo(["predict", "--source", source])
            XCTAssertEqual(result.status, 1, source)
            XCTAssertEqual(result.stderr, "Error: \(message)\n", source)
        }
    }

    /// `--shard I/N` over a folder: every input exactly once over the N shards, each shard every
    /// N-th input of the natural order from offset I; an index outside 0..<N is a usage error.
    func testShardsTakeEveryInputOnce() throws {
        let folder = scratch.appendingPathComponent("many")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let names = (1...7).map { "img\($0).jpg" }
        for name in names { try FileManager.default.copyItem(at: try sharedFile("images/bus.jpg"), to: folder.appendingPathComponent(name)) }
        var seen = [String]()
        for index in 0..<3 {
            let result = try yolo(["predict", "--imgsz", "64", "--source", folder.path, "--shard", "\(index)/3", "--save-json", "\(index).json"])
            XCTAssertEqual(result.status, 0, result.stderr)
            let shard = try json("\(index).json").compactMap { $0["image"] as? String }
            XCTAssertEqual(shard, stride(from: index, to: names.count, by: 3).map { names[$0] })
            seen += shard
        }
        XCTAssertEqual(seen.sorted(), names.sorted())
        for bad in ["3/3", "-1/3", "1/0", "1"] {
            let result = try yolo(["predict", "--source", folder.path, "--shard", bad])
            XCTAssertNotEqual(result.status, 0, bad)
            XCTAssertTrue(result.stderr.contains("--shard"), result.stderr)
        }
    }

    /// Label lines of `labels/<stem>.txt` in run folder `runs/<run>`, split into fields.
    private func labels(_ run: String, _ stem: String) throws -> [[Substring]] {
        try String(contentsOf: scratch.appendingPathComponent("runs/\(run)/labels/\(stem).txt"), encoding: .utf8)
            .split(separator: "\n").map { $0.split(separator: " ") }
    }

    private func json(_ file: String) throws -> [[String: Any]] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent(file))) as? [[String: Any]])
    }

    func testPredictSegmentPoseOBBAndClassify() throws {
        let bus = try sharedFile("images/bus.jpg").path, boats = try sharedFile("images/boats.jpg").path
        // Each in runs/<task>/<model>, confidences in the labels.
        func run(_ model: String, _ source: String) throws -> CommandResult {
            let result = try yolo(["predict", "--model", model, "--source", source, "--save", "--save-txt", "--save-conf",
                                   "--save-json", model + ".json", "--name", model])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(FileManager.default.fileExists(
                atPath: scratch.appendingPathComponent("runs/\(task(model))/\(model)/\(URL(fileURLWithPath: source).lastPathComponent)").path))
            return result
        }
        func task(_ model: String) -> String {
            ["seg": "segment", "pose": "pose", "obb": "obb", "cls": "classify"][String(model.split(separator: "-").last!)] ?? "detect"
        }
        func labels(_ model: String, _ stem: String) throws -> [[Substring]] { try self.labels("\(task(model))/\(model)", stem) }

        // segment: cls then the outline's normalized x y pairs, conf last.
        var result = try run("yolo26n-seg", bus)
        XCTAssertTrue(result.stdout.contains("image 1/1 \(bus): 640x480 4 persons, 1 bus, "), result.stdout)
        var lines = try labels("yolo26n-seg", "bus")
        XCTAssertEqual(lines.map { $0[0] }, ["0", "0", "5", "0", "0"])
        XCTAssertTrue(lines.allSatisfy { $0.count >= 8 && $0.count % 2 == 0 }, "cls x1 y1 x2 y2 x3 y3 … conf")
        XCTAssertTrue(lines.allSatisfy { $0.dropFirst().allSatisfy { Double($0).map { (0...1).contains($0) } ?? false } })
        var object = try json("yolo26n-seg.json")
        XCTAssertEqual((object[0]["masks"] as? [String: Any])?["shape"] as? [Int], [5, 640, 480])

        // pose: cls cx cy w h, 17 × (x y visibility), conf.
        result = try run("yolo26n-pose", bus)
        XCTAssertTrue(result.stdout.contains("image 1/1 \(bus): 640x480 4 persons, "), result.stdout)
        lines = try labels("yolo26n-pose", "bus")
        XCTAssertEqual(lines.count, 4)
        XCTAssertTrue(lines.allSatisfy { $0.count == 1 + 4 + 17 * 3 + 1 }, "\(lines.map(\.count))")
        object = try json("yolo26n-pose.json")
        XCTAssertEqual(((object[0]["keypoints"] as? [String: Any])?["xy"] as? [Any])?.count, 4)

        // obb: cls, four normalized corners, conf.
        result = try run("yolo26n-obb", boats)
        XCTAssertTrue(result.stdout.contains("image 1/1 \(boats): 576x1024 "), result.stdout)
        XCTAssertTrue(result.stdout.contains(" ships, "), result.stdout)
        lines = try labels("yolo26n-obb", "boats")
        XCTAssertGreaterThan(lines.count, 100)
        XCTAssertTrue(lines.allSatisfy { $0.count == 10 }, "cls x1 y1 x2 y2 x3 y3 x4 y4 conf")
        object = try json("yolo26n-obb.json")
        XCTAssertEqual(((object[0]["obb"] as? [String: Any])?["xywhr"] as? [Any])?.count, lines.count)

        // classify: the top 5 on the image line, "conf name" lines.
        result = try run("yolo26n-cls", bus)
        XCTAssertTrue(result.stdout.contains("image 1/1 \(bus): 224x224 minibus 0.59, police van 0.26, trolleybus 0.12, "),
                      result.stdout)
        let text = try String(contentsOf: scratch.appendingPathComponent("runs/classify/yolo26n-cls/labels/bus.txt"), encoding: .utf8)
        XCTAssertTrue(text.hasPrefix("0.59 minibus\n0.26 police van\n0.12 trolleybus\n"), text)
        XCTAssertEqual(text.split(separator: "\n").count, 5)
        object = try json("yolo26n-cls.json")
        XCTAssertEqual((object[0]["probs"] as? [String: Any])?["top5"] as? [Int], [654, 734, 874, 656, 829])
    }

    func testBadInputIsAOneLineErrorAndNonZeroExit() throws {
        for arguments in [["predict", "--source", "missing.jpg"],
                          ["predict", "--model", "no-such-model", "--source", "x.jpg"],
                          ["predict", "--source", scratch.path],
                          ["predict", "--source", "x.jpg", "--conf", "2"],
                          ["predict", "--source", "x.jpg", "--task", "depth"],
                          ["predict", "--model", "yolo26n-cls", "--task", "detect",
                           "--source", try sharedFile("images/bus.jpg").path]] {
            let result = try yolo(arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix("Error: "), "\(arguments): \(result.stderr)")
        }
        let bus = try sharedFile("images/bus.jpg").path
        let noThreads = try yolo(["predict", "--source", bus, "--threads", "0"])
        XCTAssertNotEqual(noThreads.status, 0)
        XCTAssertTrue(noThreads.stderr.contains("threads") && noThreads.stderr.contains("1…1024"), noThreads.stderr)
        XCTAssertEqual(try yolo(["predict", "--source", bus, "--threads", "1"]).status, 0)
        let int8 = try yolo(["predict", "--source", bus, "--precision", "int8", "--project", scratch.path])
        XCTAssertEqual(int8.status, 0, int8.stderr)
        XCTAssertTrue(int8.stdout.contains("4 persons, 1 bus"), int8.stdout)
        let badPrecision = try yolo(["predict", "--source", bus, "--precision", "int4"])
        XCTAssertNotEqual(badPrecision.status, 0)
        XCTAssertTrue(badPrecision.stderr.contains("int4"), badPrecision.stderr)
        try Data("not an image".utf8).write(to: scratch.appendingPathComponent("fake.jpg"))
        let result = try yolo(["predict", "--source", scratch.appendingPathComponent("fake.jpg").path])
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
    }

    /// Unreadable images and formats other than JPEG and PNG are reported one by one and the
    /// batch goes on; the good results are all written (the first bad image lost them all) and
    /// the command fails at the end.
    func testUnreadableImagesAreSkippedAndTheRestWritten() throws {
        let folder = scratch.appendingPathComponent("mixed")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try FileManager.default.copyItem(at: try sharedFile("images/bus.jpg"), to: folder.appendingPathComponent("a-bus.jpg"))
        try FileManager.default.copyItem(at: try sharedFile("images/zidane.jpg"), to: folder.appendingPathComponent("z-zidane.jpg"))
        try Data("not an image".utf8).write(to: folder.appendingPathComponent("b-fake.jpg"))
        try Data("BM\u{0}\u{0}".utf8).write(to: folder.appendingPathComponent("c.bmp"))
        try Data("RIFF\u{0}\u{0}\u{0}\u{0}WEBP".utf8).write(to: folder.appendingPathComponent("d.webp"))
        try Data("GIF89a".utf8).write(to: folder.appendingPathComponent("e.gif"))
        try Data("II*\u{0}".utf8).write(to: folder.appendingPathComponent("f.tiff"))
        try Data("notes".utf8).write(to: folder.appendingPathComponent("notes.txt"))
        let result = try yolo(["predict", "--source", folder.path, "--save-json", "out.json", "--save-txt"])
        XCTAssertEqual(result.status, 1, result.stderr)
        let warnings = result.stderr.split(separator: "\n")
        XCTAssertEqual(warnings.count, 6, result.stderr)
        XCTAssertEqual(warnings.last, "Error: 5 of the 7 inputs failed (see the warnings above)")
        // GIF is a video format for Ultralytics, read by ffmpeg.
        for (i, name) in ["b-fake.jpg", "c.bmp", "d.webp", "e.gif", "f.tiff"].enumerated() {
            let kind = name == "e.gif" ? "video" : "image"
            XCTAssertTrue(warnings[i].hasPrefix("WARNING ⚠️ \(kind) \(i + 2)/7 skipped: "), String(warnings[i]))
            XCTAssertTrue(warnings[i].contains(name), String(warnings[i]))
        }
        XCTAssertTrue(result.stdout.contains("image 7/7 \(folder.path)/z-zidane.jpg: 384x640 2 persons, 1 tie, "), result.stdout)
        XCTAssertTrue(result.stdout.contains("\n6 images, 1 video (0 frames), 5 failed\n"), result.stdout)
        XCTAssertEqual(try json("out.json").map { $0["image"] as? String }, ["a-bus.jpg", "z-zidane.jpg"])
        XCTAssertEqual(try labels("detect/predict", "a-bus").count, 5)

        let bad = try yolo(["predict", "--source", folder.path + "/[bc]*"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.stderr.hasSuffix("Error: 2 of the 2 inputs failed (see the warnings above)\n"), bad.stderr)
    }

    /// A disk that fills up (a file size limit stands in) while annotated images are saved: each
    /// write failure names its file, the other inputs are still predicted and the JSON written,
    /// and the command fails (it said "skipped" and exited 0).
    func testFailedWritesNameTheFileAndFailTheRun() throws {
        let folder = scratch.appendingPathComponent("images")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in ["bus.jpg", "zidane.jpg"] {
            try FileManager.default.copyItem(at: try sharedFile("images/" + name), to: folder.appendingPathComponent(name))
        }
        // 64 KB holds the JSON, not an annotated photo; SIGXFSZ ignored turns the excess into EFBIG.
        let result = try runCommand(URL(fileURLWithPath: "/usr/bin/prlimit"),
                                    ["--fsize=65536", "/bin/sh", "-c", "trap '' XFSZ; exec \"$0\" \"$@\"", executable.path,
                                     "predict", "--source", folder.path, "--imgsz", "160", "--save", "--save-json", "out.json"],
                                    in: scratch, environment: ["YOLO_WEIGHTS_DIR": try weightsDirectory().path])
        XCTAssertEqual(result.status, 1, result.stderr)
        let lines = result.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, result.stderr)
        for (i, name) in ["bus.jpg", "zidane.jpg"].enumerated() {
            XCTAssertTrue(lines[i].hasPrefix("WARNING ⚠️ image \(i + 1)/2 cannot write \(scratch.path)/runs/detect/predict/\(name): File too large"), String(lines[i]))
        }
        XCTAssertEqual(lines.last, "Error: 2 of the 2 inputs failed (see the warnings above)")
        XCTAssertEqual(try json("out.json").map { $0["image"] as? String }, ["bus.jpg", "zidane.jpg"])
    }

    /// Output paths that cannot be written fail at once, in one line, before any inference.
    func testUnwritableOutputsFailFirstAndClearly() throws {
        let bus = try sharedFile("images/bus.jpg").path
        try Data("a file".utf8).write(to: scratch.appendingPathComponent("runs"))
        try FileManager.default.createSymbolicLink(atPath: scratch.appendingPathComponent("link.txt").path, withDestinationPath: "out.txt")
        for (arguments, message) in [
            (["--save-json", "missing/out.json"], "Error: cannot write --save-json missing/out.json: No such file or directory"),
            (["--save-json", scratch.path], "Error: cannot write --save-json \(scratch.path): Is a directory"),
            (["--save"], "Error: cannot create the run folder runs/detect/predict: Not a directory"),
            (["--save-json", "out.txt", "--save-csv", "./out.txt"],
             "Error: --save-json out.txt and --save-csv ./out.txt are the same file: give each its own"),
            (["--save-json", "link.txt", "--save-csv", "out.txt"],
             "Error: --save-json link.txt and --save-csv out.txt are the same file: give each its own"),
            (["--stream", "--save-csv", "-"], "Error: --save-json - and --save-csv - are the same file: give each its own"),
        ] {
            let result = try yolo(["predict", "--source", bus] + arguments)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertEqual(result.stderr, message + "\n", "\(arguments)")
            XCTAssertFalse(result.stdout.contains("image 1/1"), "\(arguments): inference ran first")
        }
    }

    /// Results are written as they complete and not kept: 300 images peak within 20 MB of 3
    /// (each result held its decoded image, 3.8 MB an image).
    func testMemoryDoesNotGrowWithTheNumberOfImages() throws {
        let bus = try sharedFile("images/bus.jpg")
        func peak(images: Int) throws -> Int {
            let folder = scratch.appendingPathComponent("images-\(images)")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            for i in 0..<images {
                try FileManager.default.createSymbolicLink(at: folder.appendingPathComponent(String(format: "%04d.jpg", i)),
                                                           withDestinationURL: bus)
            }
            let weights = try weightsDirectory()
            let (status, peak) = try runMeasuringPeak(executable, ["predict", "--source", folder.path, "--imgsz", "160",
                                                                   "--save-json", "out-\(images).json", "--save-txt"],
                                                      in: scratch, environment: ["YOLO_WEIGHTS_DIR": weights.path])
            XCTAssertEqual(status, 0)
            XCTAssertEqual(try json("out-\(images).json").count, images)
            return peak
        }
        let few = try peak(images: 3), many = try peak(images: 300)
        XCTAssertLessThan(many - few, 20 << 20, "peak RSS \(few >> 20) MB over 3 images, \(many >> 20) MB over 300")
    }

    /// Every layer with an output: yolo26n's 23 but the head's two Upsample + Concat pairs, which
    /// the C3k2 after each runs without (`UpsampledFront`), and the head's 3 maps.
    func testDumpWritesEveryLayer() throws {
        let input = try sharedFile("reference/yolo26n/zidane.safetensors")
        let result = try yolo(["dump", "--model", "yolo26n", "--input", input.path, "--output", "layers.safetensors"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("wrote 22 tensors"), result.stdout)
    }
}

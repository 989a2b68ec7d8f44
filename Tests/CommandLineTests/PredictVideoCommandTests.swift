import Foundation
import TestSupport
import XCTest

/// `yolo predict` on videos, streams and raw frames on stdin, run as a user would.
final class PredictVideoCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String], stdin: URL? = nil) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch, environment: try environment(), stdin: stdin)
    }

    private func environment(_ extra: [String: String] = [:]) throws -> [String: String] {
        ["YOLO_WEIGHTS_DIR": try weightsDirectory().path, "YOLO_CACHE_DIR": scratch.path].merging(extra) { $1 }
    }

    /// Waits until `file` holds `text` (results are flushed as they finish); false after 60 s.
    private func waitFor(_ text: String, in file: String) -> Bool {
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline {
            if let data = try? String(contentsOf: scratch.appendingPathComponent(file), encoding: .utf8), data.contains(text) { return true }
            usleep(20_000)
        }
        return false
    }

    /// CSV rows that are all whole: the header's 12 fields each, the last line ended.
    private func assertWholeRows(_ file: String, _ message: String) throws {
        let text = try String(contentsOf: scratch.appendingPathComponent(file), encoding: .utf8)
        XCTAssertTrue(text.hasSuffix("\n"), message)
        let rows = text.split(separator: "\n")
        XCTAssertGreaterThan(rows.count, 1, message)
        XCTAssertTrue(rows.allSatisfy { $0.split(separator: ",", omittingEmptySubsequences: false).count == 12 }, message)
    }

    private func ffmpeg(_ arguments: [String]) throws {
        let result = try runCommand(URL(fileURLWithPath: "/usr/bin/env"), ["ffmpeg", "-nostdin", "-v", "error", "-y"] + arguments,
                                    in: scratch, environment: [:])
        XCTAssertEqual(result.status, 0, "ffmpeg \(arguments): \(result.stderr)")
    }

    private func json(_ file: String) throws -> [[String: Any]] {
        try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent(file))) as? [[String: Any]])
    }

    /// Every 10th frame of pan.mp4: JSON records with `frame` matching Ultralytics' boxes, CSV
    /// rows, label files per frame and the annotated H.264 video at 25 / 10 frames per second.
    func testVideoWritesJSONCSVLabelsAndAnnotatedVideo() throws {
        let pan = try sharedFile("videos/pan.mp4")
        let result = try yolo(["predict", "--source", pan.path, "--vid-stride", "10", "--save", "--save-txt",
                               "--save-json", "out.json", "--save-csv", "out.csv"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("video 1/1 (frame 15/15) \(pan.path): 384x640 "), result.stdout)
        XCTAssertTrue(result.stdout.contains("\n1 video (15 frames), 0 failed\n"), result.stdout)

        let records = try json("out.json")
        XCTAssertEqual(records.map { $0["frame"] as? Int }, Array(stride(from: 9, to: 150, by: 10)))
        XCTAssertTrue(records.allSatisfy { $0["image"] as? String == "pan.mp4" && $0["orig_shape"] as? [Int] == [360, 640] })
        struct Reference: Decodable {
            struct Frame: Decodable {
                struct Boxes: Decodable { var xyxy: [[Float]], cls: [Int] }
                var frame: Int, boxes: Boxes
            }
            var frames: [Frame]
        }
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf:
            sharedFile("reference/video/pan-predict-yolo26n.json")))
        var boxes = 0
        for record in records {
            let frame = try XCTUnwrap(record["frame"] as? Int), ours = try XCTUnwrap(record["boxes"] as? [String: Any])
            let expected = reference.frames[frame].boxes
            XCTAssertEqual((ours["cls"] as? [Int])?.sorted(), expected.cls.sorted(), "frame \(frame)")
            let xyxy = try XCTUnwrap(ours["xyxy"] as? [[Double]])
            for box in expected.xyxy {
                XCTAssertTrue(xyxy.contains { zip($0, box).allSatisfy { abs($0 - Double($1)) < 1 } }, "frame \(frame): \(box)")
            }
            boxes += xyxy.count
        }

        let csv = try String(contentsOf: scratch.appendingPathComponent("out.csv"), encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(csv.first, "image,frame,class,name,conf,x1,y1,x2,y2,id,source,time")
        XCTAssertEqual(csv.count, boxes + 1)
        XCTAssertTrue(csv[1].hasPrefix("pan.mp4,9,0,person,0.9"), String(csv[1]))
        XCTAssertTrue(csv[1].hasSuffix(",,,0.360"), "frame 9 of 25 fps: \(csv[1])")
        XCTAssertTrue(csv.dropFirst().allSatisfy { $0.split(separator: ",", omittingEmptySubsequences: false).count == 12 })

        let run = scratch.appendingPathComponent("runs/detect/predict")
        let labels = try FileManager.default.contentsOfDirectory(atPath: run.appendingPathComponent("labels").path)
        XCTAssertEqual(Set(labels), Set((1...15).map { "pan_\($0).txt" }))
        let probe = try runCommand(URL(fileURLWithPath: "/usr/bin/env"),
                                   ["ffprobe", "-v", "error", "-count_frames", "-show_entries",
                                    "stream=codec_name,width,height,avg_frame_rate,nb_read_frames", "-of", "csv=p=0",
                                    run.appendingPathComponent("pan.mp4").path], in: scratch, environment: [:])
        XCTAssertEqual(probe.stdout, "h264,640,360,5/2,15\n", probe.stderr)
    }

    /// `--stream`: one JSON object per line on stdout as frames finish; the lines for people on
    /// stderr.
    func testStreamWritesJSONLinesToStdout() throws {
        let pan = try sharedFile("videos/pan.mp4")
        let result = try yolo(["predict", "--source", pan.path, "--vid-stride", "50", "--imgsz", "160", "--stream"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let lines = result.stdout.split(separator: "\n")
        XCTAssertEqual(lines.count, 3, result.stdout)
        let frames = try lines.map { line in
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])["frame"] as? Int
        }
        XCTAssertEqual(frames, [49, 99, 149])
        XCTAssertTrue(result.stderr.contains("video 1/1 (frame 3/3) "), result.stderr)
        XCTAssertEqual(try yolo(["predict", "--source", pan.path, "--stream", "--save-json", "x.json"]).status, 1)
    }

    /// Raw BGR24 frames on stdin: whole frames are predicted and written; input that ends inside
    /// a frame fails after them, naming the bytes that arrived.
    func testStdinFramesAndAFrameCutShort() throws {
        let frames = scratch.appendingPathComponent("frames.bgr")
        try ffmpeg(["-i", try sharedFile("videos/pan.mp4").path, "-frames:v", "3", "-f", "rawvideo", "-pix_fmt", "bgr24", frames.path])
        let whole = try Data(contentsOf: frames)
        XCTAssertEqual(whole.count, 3 * 640 * 360 * 3)
        var result = try yolo(["predict", "--source", "-", "--frame-size", "640x360", "--imgsz", "320", "--save-json", "out.json"],
                              stdin: frames)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try json("out.json").map { $0["frame"] as? Int }, [0, 1, 2])
        XCTAssertTrue(result.stdout.contains("video 1/1 (frame 3/?) stdin: 192x320 2 persons"), result.stdout)

        try (whole + Data(count: 1000)).write(to: frames)
        result = try yolo(["predict", "--source", "-", "--frame-size", "640x360", "--imgsz", "320", "--save-json", "cut.json"],
                          stdin: frames)
        XCTAssertEqual(result.status, 1)
        XCTAssertEqual(result.stderr, "Error: stdin stopped after 3 frames: stdin ended inside frame 3: 1000 of its 691200 bytes arrived\n")
        XCTAssertEqual(try json("cut.json").count, 3, "the frames before the cut are written")

        for (arguments, message) in [
            (["--source", "-"], "Error: --source - reads raw BGR24 frames: give their size with --frame-size WxH, e.g. 640x360"),
            (["--source", "-", "--frame-size", "640"], "Error: --frame-size 640 is not WIDTHxHEIGHT, e.g. 640x360"),
            (["--source", "-", "--frame-size", "0x360"], "Error: invalid pixels: stdin: size 0×360 has no pixels"),
            (["--source", "x.mp4", "--frame-size", "640x360"], "Error: --frame-size 640x360 applies to --source - and cameras only"),
        ] {
            let bad = try yolo(["predict"] + arguments, stdin: frames)
            XCTAssertEqual(bad.status, 1, "\(arguments)")
            XCTAssertEqual(bad.stderr, message + "\n", "\(arguments)")
        }
    }

    /// Videos that cannot be read fail in one line; in a folder they are skipped, the rest is
    /// predicted and the command fails at the end; a file cut short writes the frames before the
    /// cut, then fails.
    func testBadVideosFailClearlyOrAreSkipped() throws {
        let pan = try sharedFile("videos/pan.mp4")
        try Data().write(to: scratch.appendingPathComponent("empty.mp4"))
        try Data("not a video".utf8).write(to: scratch.appendingPathComponent("text.mp4"))
        for (arguments, environment, message) in [
            (["--source", "empty.mp4"], [:], "Error: cannot open \(scratch.path)/empty.mp4: "),
            (["--source", "text.mp4"], [:], "Error: cannot open \(scratch.path)/text.mp4: "),
            (["--source", pan.path], ["PATH": "/nonexistent"], "Error: ffmpeg not found on PATH (/nonexistent): video sources need the Debian package ffmpeg"),
            (["--source", "rtsp://127.0.0.1:9/live"], [:], "Error: cannot open rtsp://127.0.0.1:9/live: "),
            (["--source", pan.path, "--vid-stride", "0"], [:], "Error: --vid-stride 0 must be at least 1"),
            (["--source", pan.path, "--stream-timeout", "0"], [:], "Error: configuration stream timeout = 0.0 is invalid: "),
        ] {
            try? FileManager.default.removeItem(at: scratch.appendingPathComponent("bad.json"))
            let result = try runCommand(executable, ["predict", "--save-json", "bad.json"] + arguments, in: scratch,
                                        environment: try self.environment(environment))
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertTrue(result.stderr.hasPrefix(message), "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stderr.split(separator: "\n").count, 1, result.stderr)
            // A valid empty array (it was 0 bytes), or no file when the options fail first.
            let json = try? String(contentsOf: scratch.appendingPathComponent("bad.json"), encoding: .utf8)
            XCTAssertTrue(json == "[]\n" || json == nil && arguments.contains("--vid-stride"), "\(arguments): \(json ?? "no file")")
        }

        let folder = scratch.appendingPathComponent("mixed")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try ffmpeg(["-i", pan.path, "-frames:v", "4", "-c", "copy", folder.appendingPathComponent("a.mp4").path])
        try FileManager.default.copyItem(at: scratch.appendingPathComponent("text.mp4"), to: folder.appendingPathComponent("b.mp4"))
        try FileManager.default.copyItem(at: try sharedFile("images/bus.jpg"), to: folder.appendingPathComponent("c.jpg"))
        var result = try yolo(["predict", "--source", folder.path, "--imgsz", "160", "--save-json", "mixed.json"])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.hasPrefix("WARNING ⚠️ video 2/3 skipped: cannot open \(folder.path)/b.mp4: "), result.stderr)
        XCTAssertTrue(result.stderr.hasSuffix("\nError: 1 of the 3 inputs failed (see the warnings above)\n"), result.stderr)
        XCTAssertTrue(result.stdout.contains("\n1 image, 2 videos (4 frames), 1 failed\n"), result.stdout)
        XCTAssertEqual(try json("mixed.json").map { $0["image"] as? String }, ["a.mp4", "a.mp4", "a.mp4", "a.mp4", "c.jpg"])

        // The index first, as a streamable file has it, so that a cut leaves it whole.
        let whole = scratch.appendingPathComponent("whole.mp4"), cut = scratch.appendingPathComponent("cut.mp4")
        try ffmpeg(["-i", pan.path, "-c", "copy", "-movflags", "+faststart", whole.path])
        let bytes = try Data(contentsOf: whole)
        try bytes.prefix(bytes.count / 3).write(to: cut)
        result = try yolo(["predict", "--source", cut.path, "--imgsz", "64", "--save-json", "cut.json"])
        XCTAssertEqual(result.status, 1)
        let delivered = try json("cut.json").count
        XCTAssertGreaterThan(delivered, 10)
        XCTAssertTrue(result.stderr.hasPrefix("Error: \(cut.path) stopped after \(delivered) frames: \(cut.path) ended after \(delivered) of its 150 frames: "),
                      result.stderr)
    }

    /// Streams that connect and stay silent (rtsp to a TCP listener that never answers, udp on a
    /// port nobody sends to) fail after --stream-timeout, saying so, instead of waiting
    /// forever; the JSON is a valid empty array.
    func testSilentStreamsFailAfterTheTimeout() throws {
        let tcp = try SilentPort(), udp = try SilentPort(udp: true)
        for url in ["rtsp://127.0.0.1:\(tcp.port)/live", "udp://127.0.0.1:\(udp.port)"] {
            let started = Date()
            let result = try RunningCommand(executable, ["predict", "--source", url, "--stream-timeout", "1", "--save-json", "out.json"],
                                            in: scratch, environment: try environment()).wait(timeout: 60)
            let seconds = Date().timeIntervalSince(started)
            XCTAssertEqual(result.status, 1, url)
            XCTAssertTrue(result.stderr.hasPrefix("Error: cannot open \(url): "), result.stderr)
            XCTAssertTrue(result.stderr.contains("nothing received within 1 s"), result.stderr)
            XCTAssertLessThan(seconds, 15, url)
            XCTAssertEqual(try String(contentsOf: scratch.appendingPathComponent("out.json"), encoding: .utf8), "[]\n", url)
            print("\(url): failed after \(String(format: "%.1f", seconds)) s")
        }
    }

    /// SIGTERM while ffprobe waits on a silent stream ends the run at once with 143 and stops
    /// ffprobe with it (it outlived the command, orphaned).
    func testSignalStopsTheProbeOfASilentStream() throws {
        let tcp = try SilentPort()
        let command = try RunningCommand(executable, ["predict", "--source", "rtsp://127.0.0.1:\(tcp.port)/live", "--stream-timeout", "60",
                                                      "--save-json", "out.json"], in: scratch, environment: try environment())
        var children = [Int32]()
        let deadline = Date().addingTimeInterval(30)
        while children.isEmpty && Date() < deadline {
            usleep(20_000)
            children = command.children()
        }
        XCTAssertFalse(children.isEmpty, "ffprobe never started")
        kill(command.process.processIdentifier, SIGTERM)
        let result = try command.wait(timeout: 30)
        XCTAssertEqual(result.status, 143, result.stderr)
        XCTAssertEqual(children.filter(isRunning), [], "children left running")
        XCTAssertEqual(try String(contentsOf: scratch.appendingPathComponent("out.json"), encoding: .utf8), "[]\n")
    }

    /// SIGINT while raw frames are awaited on stdin, SIGTERM in the middle of a video saved
    /// annotated: the run finishes the frame in hand, closes the JSON array and the CSV's last row
    /// and exits 130 or 143; the annotated video is whole and no ffmpeg is left.
    func testSignalsEndTheRunWithWholeFiles() throws {
        let frames = scratch.appendingPathComponent("frames.bgr")
        try ffmpeg(["-i", try sharedFile("videos/pan.mp4").path, "-frames:v", "2", "-f", "rawvideo", "-pix_fmt", "bgr24", frames.path])
        let stdin = try RunningCommand(executable, ["predict", "--source", "-", "--frame-size", "640x360", "--imgsz", "160",
                                                    "--save-json", "int.json", "--save-csv", "int.csv"],
                                       in: scratch, environment: try environment(), stdin: .pipe)
        try stdin.input?.write(contentsOf: Data(contentsOf: frames))
        XCTAssertTrue(waitFor("\"frame\" : 1", in: "int.json"), "the second frame's result never reached the file")
        kill(stdin.process.processIdentifier, SIGINT)
        var result = try stdin.wait(timeout: 30)
        XCTAssertEqual(result.status, 130, result.stderr)
        XCTAssertEqual(try json("int.json").map { $0["frame"] as? Int }, [0, 1])
        try assertWholeRows("int.csv", "SIGINT")

        let long = scratch.appendingPathComponent("long.mp4")
        try ffmpeg(["-stream_loop", "9", "-i", try sharedFile("videos/pan.mp4").path, "-c", "copy", long.path])
        let video = try RunningCommand(executable, ["predict", "--source", long.path, "--imgsz", "160", "--save",
                                                    "--save-json", "term.json", "--save-csv", "term.csv"],
                                       in: scratch, environment: try environment())
        XCTAssertTrue(waitFor("\"frame\" : 3", in: "term.json"), "the fourth frame's result never reached the file")
        let children = video.children()
        XCTAssertEqual(children.count, 2, "the decoding and the encoding ffmpeg")
        kill(video.process.processIdentifier, SIGTERM)
        result = try video.wait(timeout: 30)
        XCTAssertEqual(result.status, 143, result.stderr)
        let records = try json("term.json")
        XCTAssertEqual(records.map { $0["frame"] as? Int }, Array(0..<records.count))
        XCTAssertLessThan(records.count, 1500)
        try assertWholeRows("term.csv", "SIGTERM")
        XCTAssertEqual(children.filter(isRunning), [], "ffmpeg left running")
        let probe = try runCommand(URL(fileURLWithPath: "/usr/bin/env"),
                                   ["ffprobe", "-v", "error", "-count_frames", "-show_entries", "stream=nb_read_frames", "-of", "csv=p=0",
                                    scratch.appendingPathComponent("runs/detect/predict/long.mp4").path], in: scratch, environment: [:])
        XCTAssertEqual(probe.stdout, "\(records.count)\n", probe.stderr)
    }

    /// A video the encoder cannot take (wider than H.264's 16384) fails alone: the run goes on
    /// with the next input, the JSON holds every result and closes, and the command fails at the
    /// end.
    func testAVideoThatCannotBeSavedFailsAloneAndTheRunGoesOn() throws {
        let folder = scratch.appendingPathComponent("wide")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=17000x64:rate=5", "-frames:v", "2", "-c:v", "ffv1",
                    folder.appendingPathComponent("a-wide.mkv").path])
        try FileManager.default.copyItem(at: try sharedFile("images/bus.jpg"), to: folder.appendingPathComponent("b-bus.jpg"))
        let result = try yolo(["predict", "--source", folder.path, "--imgsz", "160", "--save", "--save-json", "out.json"])
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertEqual(result.stderr, "WARNING ⚠️ video 1/2 cannot write video \(scratch.path)/runs/detect/predict/a-wide.mp4: "
                       + "17000×64: H.264 holds sides of 1 to 16384\nError: 1 of the 2 inputs failed (see the warnings above)\n")
        XCTAssertEqual(try json("out.json").map { $0["image"] as? String }, ["a-wide.mkv", "b-bus.jpg"])
        XCTAssertTrue(result.stdout.contains("\n1 image, 1 video (1 frames), 1 failed\n"), result.stdout)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("runs/detect/predict/b-bus.jpg").path))
    }

    /// Nothing is kept per frame: 1,000 frames peak within 10 MB of 50, saving JSON, CSV and the
    /// annotated video.
    func testMemoryDoesNotGrowWithTheLengthOfTheVideo() throws {
        func peak(frames: Int) throws -> Int {
            let video = scratch.appendingPathComponent("test-\(frames).mp4")
            try ffmpeg(["-f", "lavfi", "-i", "testsrc=size=160x96:rate=25", "-frames:v", String(frames), "-pix_fmt", "yuv420p", video.path])
            let weights = try weightsDirectory()
            let (status, peak) = try runMeasuringPeak(executable, ["predict", "--source", video.path, "--imgsz", "64", "--save",
                                                                   "--save-json", "out-\(frames).json", "--save-csv", "out-\(frames).csv"],
                                                      in: scratch, environment: ["YOLO_WEIGHTS_DIR": weights.path])
            XCTAssertEqual(status, 0)
            XCTAssertEqual(try json("out-\(frames).json").count, frames)
            return peak
        }
        let few = try peak(frames: 50), many = try peak(frames: 1000)
        XCTAssertLessThan(many - few, 10 << 20, "peak RSS \(few >> 20) MB over 50 frames, \(many >> 20) MB over 1000")
    }
}

/// `yolo track`: Ultralytics' track IDs in every output.
final class TrackCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    /// pan.mp4 with ByteTrack: every frame's boxes and IDs as Ultralytics'
    /// `track(persist=True)`, the IDs in CSV rows and at the end of label lines.
    func testTrackIDsMatchUltralytics() throws {
        let weights = try weightsDirectory()
        let result = try runCommand(executable, ["track", "--source", try sharedFile("videos/pan.mp4").path, "--save-json", "t.json",
                                                 "--save-csv", "t.csv", "--save-txt", "--quiet"],
                                    in: scratch, environment: ["YOLO_WEIGHTS_DIR": weights.path])
        XCTAssertEqual(result.status, 0, result.stderr)
        struct Frame: Decodable {
            struct Boxes: Decodable { var cls: [Int], id: [Int]? }
            var frame: Int, boxes: Boxes
        }
        struct Reference: Decodable { var frames: [Frame] }
        let ours = try JSONDecoder().decode([Frame].self, from: Data(contentsOf: scratch.appendingPathComponent("t.json")))
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf:
            sharedFile("reference/video/pan-track-yolo26n.json"))).frames
        XCTAssertEqual(ours.count, reference.count)
        for (a, b) in zip(ours, reference) {
            XCTAssertEqual(a.boxes.cls, b.boxes.cls, "frame \(a.frame)")
            XCTAssertEqual(a.boxes.id ?? [], b.boxes.id ?? [], "frame \(a.frame)")
        }
        let rows = try String(contentsOf: scratch.appendingPathComponent("t.csv"), encoding: .utf8).split(separator: "\n")
        let id = try XCTUnwrap(rows[0].split(separator: ",").firstIndex(of: "id"))
        XCTAssertEqual(rows[1].split(separator: ",", omittingEmptySubsequences: false)[id], Substring(String(reference[0].boxes.id![0])))
        let label = try String(contentsOf: scratch.appendingPathComponent("runs/detect/track/labels/pan_1.txt"), encoding: .utf8)
        XCTAssertEqual(label.split(separator: "\n")[0].split(separator: " ").count, 6, "cls cx cy w h id, without --save-conf")

        let bad = try runCommand(executable, ["track", "--model", "yolo26n-cls", "--source", try sharedFile("videos/pan.mp4").path],
                                 in: scratch, environment: ["YOLO_WEIGHTS_DIR": weights.path])
        XCTAssertEqual(bad.status, 1)
        XCTAssertEqual(bad.stderr, "Error: classify results have no boxes to track; track detect, segment, pose or obb results\n")
        let unknown = try runCommand(executable, ["track", "--tracker", "bytetrak", "--source", "x.mp4"], in: scratch, environment: [:])
        XCTAssertEqual(unknown.status, 1)
        XCTAssertEqual(unknown.stderr, "Error: cannot read tracker configuration bytetrak: no such file; "
                       + "name bytetrack, botsort, tracktrack, ocsort, fasttrack, deepocsort, spatial or a tracker YAML file\n")
    }
}

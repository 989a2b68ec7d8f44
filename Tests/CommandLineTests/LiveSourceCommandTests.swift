import Foundation
import TestSupport
import XCTest

/// `yolo predict` on live sources: an MPEG-TS broadcast over loopback HTTP at a URL without
/// extension (cut, faster than real time, ended for good), cameras, and `.streams` lists.
final class LiveSourceCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    /// pan.mp4 as a broadcast would carry it: MPEG-TS, a keyframe every 12 frames (0.48 s).
    private func broadcastFile() throws -> URL {
        let file = scratch.appendingPathComponent("pan.ts")
        try ffmpeg(["-i", try sharedFile("videos/pan.mp4").path, "-c:v", "libx264", "-preset", "ultrafast", "-g", "12", "-f", "mpegts", file.path])
        return file
    }

    private func ffmpeg(_ arguments: [String]) throws {
        let result = try runCommand(URL(fileURLWithPath: "/usr/bin/env"), ["ffmpeg", "-nostdin", "-v", "error", "-y"] + arguments,
                                    in: scratch, environment: [:])
        XCTAssertEqual(result.status, 0, "ffmpeg \(arguments): \(result.stderr)")
    }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch, environment: ["YOLO_WEIGHTS_DIR": try weightsDirectory().path])
    }

    /// The `frame` of each JSON record, by source when records carry one.
    private func frames(_ file: String) throws -> [Int?: [Int]] {
        let records = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent(file))) as? [[String: Any]])
        return Dictionary(grouping: records) { $0["source"] as? Int }.mapValues { $0.compactMap { $0["frame"] as? Int } }
    }

    /// A 2-second cut halfway through is reconnected, frames keep their numbers and those after
    /// the cut are predicted (every frame kept: `--stream-buffer`); when the broadcast ends for
    /// good, the 5 attempts fail within 15 s and the run ends with an error, its results written.
    func testCutIsReconnectedAndTheEndEndsTheRun() throws {
        let broadcast = try Broadcast(try broadcastFile(), duration: 6, speed: 2)
        defer { broadcast.close() }
        broadcast.cut(at: 0.5, for: 2)
        let result = try yolo(["predict", "--source", broadcast.url.absoluteString, "--stream-buffer", "--imgsz", "160",
                               "--save-json", "out.json", "--quiet"])
        let exited = Date()
        let ended = try XCTUnwrap(broadcast.endedAt, "the broadcast never reached its end")
        XCTAssertEqual(result.status, 1, result.stderr)
        XCTAssertTrue(result.stderr.contains("reconnected to \(broadcast.url.absoluteString) after "), result.stderr)
        let frames = try XCTUnwrap(try self.frames("out.json")[nil])
        // Before the cut, about 75 frames; a GOP or two may be lost to it.
        XCTAssertGreaterThan(frames.count, 120, "frames after the cut were predicted")
        XCTAssertEqual(frames, Array(0..<frames.count), "frame numbers keep counting")
        XCTAssertTrue(result.stderr.contains("Error: \(broadcast.url.absoluteString) stopped after \(frames.count) frames: "
                                             + "\(broadcast.url.absoluteString) was lost and 5 attempts to reconnect failed; the last: "), result.stderr)
        XCTAssertLessThan(exited.timeIntervalSince(ended), 15)
        XCTAssertTrue(result.stdout.contains("1 video (\(frames.count) frames, "), "the summary of what was predicted: \(result.stdout)")
        print("cut reconnected, \(frames.count) frames; the run ended \(String(format: "%.1f", exited.timeIntervalSince(ended))) s after the broadcast")
    }

    /// At 4× real time, faster than inference at 640: the newest frames are predicted and the
    /// stale ones dropped, numbered as the source counts them; `--stream-buffer` keeps all 150.
    /// `--reconnect 0`: the broadcast's end ends the run.
    func testFasterThanRealTimeDropsStaleFramesUnlessBuffered() throws {
        let file = try broadcastFile()
        let fresh = try Broadcast(file, duration: 6, speed: 4)
        defer { fresh.close() }
        var result = try yolo(["predict", "--source", fresh.url.absoluteString, "--reconnect", "0", "--save-json", "fresh.json", "--quiet"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let kept = try XCTUnwrap(try frames("fresh.json")[nil])
        XCTAssertLessThan(kept.count, 150)
        XCTAssertEqual(kept, kept.sorted())
        XCTAssertEqual(Set(kept).count, kept.count)
        XCTAssertEqual(kept.last, 149, "the newest frame is never dropped")
        XCTAssertTrue(result.stdout.contains("1 video (\(kept.count) frames, \(150 - kept.count) dropped, 0 reconnects), 0 failed"), result.stdout)

        let buffered = try Broadcast(file, duration: 6, speed: 4)
        defer { buffered.close() }
        result = try yolo(["predict", "--source", buffered.url.absoluteString, "--reconnect", "0", "--stream-buffer", "--imgsz", "160",
                           "--save-json", "all.json", "--quiet"])
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertEqual(try frames("all.json")[nil], Array(0..<150))
        print("4× real time: \(kept.count) of 150 frames predicted fresh, all 150 with --stream-buffer")
    }

    /// An http URL serving an image is predicted as an image, as Ultralytics decides: by its
    /// extension, or by its Content-Type when its path has none (a camera's snapshot URL); the
    /// results are the file's, and the annotated image is saved as JPEG.
    func testImageURLsArePredictedAsImages() throws {
        let bus = try sharedFile("images/bus.jpg")
        let script = """
            import sys
            from http.server import BaseHTTPRequestHandler, HTTPServer
            body = open(sys.argv[2], "rb").read()
            class Snapshot(BaseHTTPRequestHandler):
                def do_GET(self):
                    self.send_response(200)
                    self.send_header("Content-Type", "image/jpeg")
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                def log_message(self, *args): pass
            HTTPServer(("127.0.0.1", int(sys.argv[1])), Snapshot).serve_forever()
            """
        let (server, port) = try startPythonServer { ["-c", script, String($0), bus.path] }
        defer {
            server.terminate()
            server.waitUntilExit()
        }
        func records(_ file: String) throws -> [[String: Any]] {
            try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent(file))) as? [[String: Any]])
        }
        var result = try yolo(["predict", "--source", bus.path, "--save-json", "file.json"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let expected = try XCTUnwrap(try records("file.json").first)
        for (path, saved) in [("snapshot", "snapshot.jpg"), ("images/bus.jpg", "bus.jpg")] {
            result = try yolo(["predict", "--source", "http://127.0.0.1:\(port)/\(path)", "--save-json", "url.json", "--save", "--exist-ok"])
            XCTAssertEqual(result.status, 0, result.stderr)
            XCTAssertTrue(result.stdout.contains("1 image, 0 failed"), result.stdout)
            var record = try XCTUnwrap(try records("url.json").first)
            XCTAssertEqual(record["image"] as? String, URL(fileURLWithPath: path).lastPathComponent)
            (record["image"], record["speed_ms"]) = (expected["image"], expected["speed_ms"])
            XCTAssertEqual(NSDictionary(dictionary: record), NSDictionary(dictionary: expected))
            XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("runs/detect/predict/\(saved)").path))
        }
    }

    /// A camera that is not there is a clear error; camera hints need a camera.
    func testMissingCameraAndMisplacedHints() throws {
        var result = try yolo(["predict", "--source", "57", "--frame-size", "640x480", "--fps", "30"])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.stderr.hasPrefix("Error: no camera at /dev/video57: "), result.stderr)
        result = try yolo(["predict", "--source", "/dev/video57"])
        XCTAssertTrue(result.stderr.hasPrefix("Error: no camera at /dev/video57: "), result.stderr)
        result = try yolo(["predict", "--source", try sharedFile("videos/pan.mp4").path, "--fps", "30"])
        XCTAssertEqual(result.stderr, "Error: --fps 30.0 applies to cameras only\n")
    }

    /// A `.streams` list of pan.mp4 and a second clip runs both side by side: each source's
    /// records (marked with its line's index) and label files are those of its single run, and
    /// each source has its own tracker.
    func testStreamsListGivesEachSourceItsSingleRunResults() throws {
        let pan = try sharedFile("videos/pan.mp4")
        let clip = scratch.appendingPathComponent("clip.mp4")
        try ffmpeg(["-ss", "2", "-i", pan.path, "-vf", "hflip,scale=480:270", "-frames:v", "40", clip.path])
        try "\(pan.path)\n\(clip.path)\n".write(to: scratch.appendingPathComponent("cams.streams"), atomically: true, encoding: .utf8)
        let options = ["--imgsz", "320", "--vid-stride", "4", "--quiet"]
        var result = try yolo(["predict", "--source", "cams.streams", "--save-json", "list.json", "--save-txt", "--name", "list"] + options)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("2 videos (47 frames), 0 failed"), result.stdout)
        let list = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("list.json"))) as? [[String: Any]])
        for (index, source) in [pan, clip].enumerated() {
            result = try yolo(["predict", "--source", source.path, "--save-json", "single\(index).json", "--save-txt", "--name", "single\(index)"] + options)
            XCTAssertEqual(result.status, 0, result.stderr)
            let single = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("single\(index).json"))) as? [[String: Any]])
            let mine = list.filter { $0["source"] as? Int == index }
            XCTAssertEqual(mine.count, single.count, source.path)
            for (a, b) in zip(mine, single) {
                XCTAssertEqual(a["frame"] as? Int, b["frame"] as? Int)
                XCTAssertEqual(a["boxes"] as? NSDictionary, b["boxes"] as? NSDictionary, "\(source.lastPathComponent) frame \(b["frame"] ?? "")")
            }
            let labels = scratch.appendingPathComponent("runs/detect/single\(index)/labels")
            for name in try FileManager.default.contentsOfDirectory(atPath: labels.path) {
                XCTAssertEqual(try String(contentsOf: labels.appendingPathComponent(name), encoding: .utf8),
                               try String(contentsOf: scratch.appendingPathComponent("runs/detect/list/labels/\(name)"), encoding: .utf8), name)
            }
        }
        // `yolo track`: a tracker per source, so each source's IDs start at 1.
        result = try yolo(["track", "--source", "cams.streams", "--save-json", "tracks.json"] + options)
        XCTAssertEqual(result.status, 0, result.stderr)
        let tracks = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: scratch.appendingPathComponent("tracks.json"))) as? [[String: Any]])
        for index in [0, 1] {
            let ids = tracks.filter { $0["source"] as? Int == index }.flatMap { ($0["boxes"] as? [String: Any])?["id"] as? [Int] ?? [] }
            XCTAssertEqual(ids.min(), 1, "source \(index)")
        }
        try "".write(to: scratch.appendingPathComponent("empty.streams"), atomically: true, encoding: .utf8)
        result = try yolo(["predict", "--source", "empty.streams"])
        XCTAssertEqual(result.stderr, "Error: empty.streams lists no source: give one path or URL a line\n")
    }
}

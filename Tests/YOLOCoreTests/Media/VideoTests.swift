import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Video through ffmpeg: per-frame parity with Ultralytics, and sources that fail.
final class VideoTests: XCTestCase {
    private func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    }

    /// Every frame of pan.mp4 against Ultralytics' `predict(stream=True)`: each reference box
    /// matched by one of ours with its class at IoU ≥ 0.99 and |Δconf| ≤ 0.005, and no other.
    func testPanParityWithUltralytics() async throws {
        try await checkPan(reference: "pan-predict-yolo26n.json", tracker: nil)
    }

    /// ByteTrack (`bytetrack.yaml`) on every frame of pan.mp4 against Ultralytics'
    /// `track(persist=True)`: the boxes as in the predict parity, each with the reference's track
    /// ID, and no ID where Ultralytics reports the frame's detections untracked.
    func testPanByteTrackParityWithUltralytics() async throws {
        try await checkPan(reference: "pan-track-yolo26n.json", tracker: .bytetrack)
    }

    /// BoT-SORT without camera-motion compensation (`trackers/botsort-nogmc.yaml`), likewise.
    func testPanBoTSORTParityWithUltralytics() async throws {
        let tracker = try TrackerConfiguration(named: sharedFile("trackers/botsort-nogmc.yaml").path)
        try await checkPan(reference: "pan-track-botsort-yolo26n.json", tracker: tracker)
    }

    private func checkPan(reference name: String, tracker: TrackerConfiguration?) async throws {
        struct Reference: Decodable {
            struct Frame: Decodable {
                /// `id` in the tracking references: empty where the frame's boxes are untracked.
                struct Boxes: Decodable { var xyxy: [[Float]], conf: [Float], cls: [Int], id: [Int]? }
                var frame: Int, boxes: Boxes
            }
            var frames: [Frame]
        }
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf:
            sharedFile("reference/video/" + name)))
        let session = try YOLOSession(model: try Fixtures.model("yolo26n"), source: .video(try sharedFile("videos/pan.mp4")), tracker: tracker)
        XCTAssertEqual(session.frameCount, 150)
        XCTAssertEqual(session.frameRate, 25)
        var frames = 0, boxes = 0, sameIDs = 0, worstIoU: Float = 1, worstConf: Float = 0
        for await result in session.results {
            let frame = frames
            frames += 1
            XCTAssertEqual(result.frame, frame)
            XCTAssertEqual(result.path, "pan.mp4")
            XCTAssertEqual(result.originalShape, [360, 640])
            guard frame < reference.frames.count else { continue }
            let expected = reference.frames[frame].boxes
            XCTAssertEqual(result.boxes.count, expected.cls.count, "frame \(frame): box count")
            let ids = expected.id.flatMap { $0.isEmpty ? nil : $0 }
            var unmatched = result.boxes
            for i in expected.cls.indices {
                let best = unmatched.indices.filter { unmatched[$0].cls == expected.cls[i] }
                    .max { iou(unmatched[$0].xyxy, expected.xyxy[i]) < iou(unmatched[$1].xyxy, expected.xyxy[i]) }
                guard let best else { XCTFail("frame \(frame): no \(expected.cls[i]) box for reference box \(i)"); continue }
                let overlap = iou(unmatched[best].xyxy, expected.xyxy[i]), conf = abs(unmatched[best].conf - expected.conf[i])
                XCTAssertGreaterThanOrEqual(overlap, 0.99, "frame \(frame) box \(i)")
                XCTAssertLessThanOrEqual(conf, 0.005, "frame \(frame) box \(i)")
                if tracker != nil {
                    XCTAssertEqual(unmatched[best].id, ids?[i], "frame \(frame) box \(i): track ID")
                    if unmatched[best].id == ids?[i] { sameIDs += 1 }
                }
                worstIoU = min(worstIoU, overlap)
                worstConf = max(worstConf, conf)
                boxes += 1
                unmatched.remove(at: best)
            }
        }
        XCTAssertNil(session.error)
        XCTAssertEqual(frames, reference.frames.count)
        print("pan.mp4 \(name): \(frames) frames, \(boxes) boxes" + (tracker == nil ? "" : ", \(sameIDs) with the same ID")
              + ", min IoU \(worstIoU), max |Δconf| \(worstConf)")
    }

    /// A file cut short: the frames before the cut, then `endedEarly`.
    func testTruncatedVideoDeliversFramesBeforeTheCut() async throws {
        let directory = try Fixtures.temporaryDirectory(self)
        // The index (moov) first, as a streamable file has it, so that a cut leaves it whole.
        let whole = directory.appendingPathComponent("whole.mp4"), cut = directory.appendingPathComponent("cut.mp4")
        try ffmpeg(["-i", sharedFile("videos/pan.mp4").path, "-c", "copy", "-movflags", "+faststart", whole.path])
        let bytes = try Data(contentsOf: whole)
        try bytes.prefix(bytes.count / 3).write(to: cut)

        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(cut))
        var frames = [Int]()
        for await result in session.results { frames.append(result.frame!) }
        XCTAssertGreaterThan(frames.count, 10)
        XCTAssertEqual(frames, Array(0..<frames.count))
        guard case let .endedEarly(source, count, expected, reason) = session.error as? SourceError else {
            return XCTFail("expected endedEarly, got \(String(describing: session.error))")
        }
        XCTAssertEqual(source, cut.path)
        XCTAssertEqual(count, frames.count)
        XCTAssertEqual(expected, 150)
        XCTAssertTrue(reason.contains("partial file"), reason)
    }

    /// A stream rotated a quarter turn is delivered upright, its sides swapped.
    func testRotatedVideoIsDeliveredUpright() async throws {
        let rotated = try Fixtures.temporaryDirectory(self).appendingPathComponent("rotated.mp4")
        try ffmpeg(["-i", sharedFile("videos/pan.mp4").path, "-t", "0.2", "-c", "copy", "-metadata:s:v:0", "rotate=90", rotated.path])
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(rotated))
        var shapes = [[Int]]()
        for await result in session.results { shapes.append(result.originalShape) }
        XCTAssertNil(session.error)
        XCTAssertFalse(shapes.isEmpty)
        XCTAssertEqual(Set(shapes), [[640, 360]])
    }

    private func ffmpeg(_ arguments: [String]) throws {
        let (status, output) = try runTool(["ffmpeg", "-nostdin", "-v", "error", "-y"] + arguments, stderr: true)
        XCTAssertEqual(status, 0, "ffmpeg \(arguments): \(output)")
    }

    /// Files that are no video throw at `init`, with ffmpeg's message.
    func testUnreadableFilesThrowAtInit() throws {
        let directory = try Fixtures.temporaryDirectory(self)
        let empty = directory.appendingPathComponent("empty.mp4"), text = directory.appendingPathComponent("text.mp4")
        try Data().write(to: empty)
        try Data("not a video\n".utf8).write(to: text)
        let model = try Fixtures.model("yolo26n", imageSize: 64)
        for (file, message) in [(empty, "Invalid data found"), (text, "Invalid data found"),
                                (directory.appendingPathComponent("missing.mp4"), "No such file")] {
            XCTAssertThrowsError(try YOLOSession(model: model, source: .video(file))) { error in
                guard case let .cannotOpen(source, reason) = error as? SourceError else { return XCTFail("\(error)") }
                XCTAssertEqual(source, file.path)
                XCTAssertTrue(reason.contains(message), reason)
            }
        }
    }

    func testUnreachableStreamThrowsAtInit() throws {
        // A port just bound and released: closed, so the connection is refused at once.
        let url = URL(string: "http://127.0.0.1:\(try SilentPort(closed: true).port)/live.mp4")!
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(url))) { error in
            guard case let .cannotOpen(source, reason) = error as? SourceError else { return XCTFail("\(error)") }
            XCTAssertEqual(source, url.absoluteString)
            XCTAssertTrue(reason.contains("Connection refused"), reason)
        }
    }

    /// A stream that connects and stays silent (rtsp to a TCP listener that never answers)
    /// fails to open after the policy's timeout instead of hanging; cancelling the task stops
    /// the opening at once.
    func testSilentStreamTimesOutAndCancellationStopsTheProbe() async throws {
        let listener = try SilentPort()
        // Were the timeout ignored, this frees ffprobe after 15 s (a listener shut down resets the
        // connections it has not accepted): the test fails instead of hanging.
        let watchdog = DispatchWorkItem { shutdown(listener.fd, Int32(SHUT_RDWR)) }
        DispatchQueue.global().asyncAfter(deadline: .now() + 15, execute: watchdog)
        defer { watchdog.cancel() }
        let url = URL(string: "rtsp://127.0.0.1:\(listener.port)/live")!
        let model = try Fixtures.model("yolo26n", imageSize: 64)
        var started = Date()
        XCTAssertThrowsError(try YOLOSession(model: model, source: .video(url), reconnect: ReconnectPolicy(timeout: 1))) { error in
            guard case let .cannotOpen(source, reason) = error as? SourceError else { return XCTFail("\(error)") }
            XCTAssertEqual(source, url.absoluteString)
            XCTAssertTrue(reason.hasSuffix("(nothing received within 1 s)"), reason)
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 10)

        started = Date()
        let opening = Task.detached { try YOLOSession(model: model, source: .video(url), reconnect: ReconnectPolicy(timeout: 20)) }
        try await Task.sleep(for: .milliseconds(500))
        opening.cancel()
        do {
            _ = try await opening.value
            XCTFail("a silent stream opened")
        } catch {
            XCTAssertTrue(error is CancellationError, "\(error)")
        }
        XCTAssertLessThan(Date().timeIntervalSince(started), 5, "the probe ran on after the cancellation")
    }

    func testMissingFFmpegNamesThePackage() throws {
        let path = String(cString: getenv("PATH"))
        setenv("PATH", "/nonexistent", 1)
        defer { setenv("PATH", path, 1) }
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")))) { error in
            XCTAssertEqual(error as? SourceError, .toolNotFound(tool: "ffmpeg", searched: "/nonexistent"))
            XCTAssertTrue(error.localizedDescription.contains("Debian package ffmpeg"), error.localizedDescription)
        }
    }

    /// A pipe in stdin's place until the test ends: its write end.
    private func stdinPipe() -> Int32 {
        var ends: [Int32] = [0, 0]
        XCTAssertEqual(pipe(&ends), 0)
        let savedStdin = dup(STDIN_FILENO)
        XCTAssertEqual(dup2(ends[0], STDIN_FILENO), STDIN_FILENO)
        close(ends[0])
        addTeardownBlock {
            dup2(savedStdin, STDIN_FILENO)
            close(savedStdin)
        }
        return ends[1]
    }

    /// Raw frames on stdin: whole frames are delivered, a cut one is `partialFrame`.
    func testStdinClosingMidFrame() async throws {
        let (width, height) = (32, 24), frameBytes = 32 * 24 * 3
        let input = stdinPipe()
        let bytes = [UInt8](repeating: 128, count: frameBytes * 2 + 100)
        XCTAssertEqual(bytes.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }, bytes.count)
        close(input)

        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .stdin(width: width, height: height))
        var frames = [Int]()
        for await result in session.results {
            frames.append(result.frame!)
            XCTAssertEqual(result.originalShape, [height, width])
        }
        XCTAssertEqual(frames, [0, 1])
        XCTAssertEqual(session.error as? SourceError, .partialFrame(source: "stdin", frame: 2, bytes: 100, expected: frameBytes))
    }

    /// A stopped stdin session's reader takes none of the bytes that follow: the next session on
    /// stdin gets them whole.
    func testStoppedStdinSessionLeavesTheInput() async throws {
        let (width, height) = (32, 24), frameBytes = 32 * 24 * 3
        let input = stdinPipe()
        let frame = [UInt8](repeating: 128, count: frameBytes)
        let model = try Fixtures.model("yolo26n", imageSize: 64)
        let first = try YOLOSession(model: model, source: .stdin(width: width, height: height))
        XCTAssertEqual(frame.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }, frameBytes)
        var results = first.results.makeAsyncIterator()
        let result = await results.next()
        XCTAssertEqual(result?.frame, 0)
        first.stop()
        XCTAssertEqual(frame.withUnsafeBytes { write(input, $0.baseAddress, $0.count) }, frameBytes)
        close(input)

        let second = try YOLOSession(model: model, source: .stdin(width: width, height: height))
        var frames = [Int]()
        for await result in second.results { frames.append(result.frame!) }
        XCTAssertNil(second.error)
        XCTAssertEqual(frames, [0])
    }

    /// Sizes without pixels, over the pixel budget, or whose product overflows are typed errors.
    func testStdinFrameSizesOutOfRangeThrow() throws {
        let model = try Fixtures.model("yolo26n", imageSize: 64)
        XCTAssertThrowsError(try YOLOSession(model: model, source: .stdin(width: 0, height: 10))) { error in
            guard case .invalidPixels? = error as? ImageError else { return XCTFail("\(error)") }
        }
        for (width, height) in [(20_000, 20_000), (Int.max, 2)] {
            XCTAssertThrowsError(try YOLOSession(model: model, source: .stdin(width: width, height: height))) { error in
                guard case .tooLarge? = error as? ImageError else { return XCTFail("\(width)×\(height): \(error)") }
                XCTAssertFalse(error.localizedDescription.isEmpty, "the message is formed without overflowing")
            }
        }
    }
}

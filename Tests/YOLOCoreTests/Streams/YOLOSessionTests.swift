import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Models and scratch directories the stream tests share.
enum Fixtures {
    /// A model from the weights directory, at `imageSize` (nil: its own) to keep tests fast.
    static func model(_ name: String, imageSize: Int? = nil) throws -> YOLO {
        var configuration = YOLOConfiguration()
        configuration.imageSize = imageSize
        return try YOLO(contentsOf: weightsFile(name), configuration: configuration)
    }

    /// A fresh temporary directory, removed at the end of `test`.
    static func temporaryDirectory(_ test: XCTestCase) throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-stream-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        test.addTeardownBlock { try? FileManager.default.removeItem(at: url) }
        return url
    }
}

/// `YOLOSession`: order, pause and resume, live settings, model swap, stop, dropping.
final class YOLOSessionTests: XCTestCase {
    func testImageDirectoryInNaturalOrder() async throws {
        let directory = try Fixtures.temporaryDirectory(self)
        let bus = try sharedFile("images/bus.jpg")
        for name in ["img10.jpg", "img2.jpg", "img1.jpg", "notes.txt"] {
            try FileManager.default.copyItem(at: bus, to: directory.appendingPathComponent(name))
        }
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .images([directory]))
        XCTAssertEqual(session.frameCount, 3)
        var seen = [(Int?, String?)]()
        for await result in session.results { seen.append((result.frame, result.path)) }
        XCTAssertNil(session.error)
        XCTAssertEqual(seen.map(\.0), [0, 1, 2])
        XCTAssertEqual(seen.map(\.1), ["img1.jpg", "img2.jpg", "img10.jpg"])

        let pattern = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64),
                                      source: .images([directory.appendingPathComponent("img1*.jpg")]))
        var names = [String?]()
        for await result in pattern.results { names.append(result.path) }
        XCTAssertNil(pattern.error)
        XCTAssertEqual(names, ["img1.jpg", "img10.jpg"])
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64),
                                             source: .images([directory.appendingPathComponent("none*.jpg")]))) { error in
            XCTAssertEqual(error as? SourceError, .cannotOpen(source: directory.appendingPathComponent("none*.jpg").path,
                                                              reason: "no file matches the pattern"))
        }
        let notes = try Fixtures.temporaryDirectory(self)
        try Data("notes".utf8).write(to: notes.appendingPathComponent("notes.txt"))
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .images([notes]))) { error in
            XCTAssertEqual(error as? SourceError, .cannotOpen(source: notes.path, reason: "the directory holds no JPEG or PNG image"))
        }
    }

    /// `frameStride` 3 reads frames 2, 5, 8, … as Ultralytics' `vid_stride` does.
    func testFrameStrideKeepsEveryNthFrame() async throws {
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")),
                                      frameStride: 3)
        var frames = [Int]()
        for await result in session.results { frames.append(result.frame!) }
        XCTAssertNil(session.error)
        XCTAssertEqual(frames, Array(stride(from: 2, to: 150, by: 3)))
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")),
                                             frameStride: 0))
    }

    func testFramesInOrderAndLatestResult() async throws {
        let image = try Image(contentsOf: sharedFile("images/zidane.jpg"))
        let (frames, feed) = AsyncStream.makeStream(of: Image.self)
        for _ in 0..<5 { feed.yield(image) }
        feed.finish()
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .frames(frames), dropsStaleFrames: false)
        var indices = [Int]()
        var last: Results?
        for await result in session.results {
            indices.append(result.frame ?? -1)
            last = result
        }
        XCTAssertEqual(indices, [0, 1, 2, 3, 4])
        XCTAssertEqual(session.latestResult, last)
        XCTAssertEqual(session.droppedFrames, 0)
        XCTAssertNil(session.error)
    }

    /// No result arrives between `pause()` and `resume()`; the source continues where it was.
    func testPauseHoldsResultsUntilResume() async throws {
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")))
        var pausedAt = ContinuousClock.now
        var arrivals = [(frame: Int, at: ContinuousClock.Instant)]()
        for await result in session.results {
            arrivals.append((result.frame!, .now))
            if result.frame == 1 {
                session.pause()
                pausedAt = .now
                Task {
                    try await Task.sleep(for: .milliseconds(500))
                    session.resume()
                }
            }
            if result.frame == 3 { session.stop() }
        }
        XCTAssertEqual(arrivals.map(\.frame), [0, 1, 2, 3])
        XCTAssertGreaterThanOrEqual(arrivals[2].at - pausedAt, .milliseconds(500), "a result arrived while paused")
    }

    /// A configuration change applies from the next frame on, and not to the model itself, which
    /// other code may share.
    func testConfigurationChangeAppliesToNextFrame() async throws {
        let model = try Fixtures.model("yolo26n", imageSize: 320)
        let session = try YOLOSession(model: model, source: .video(try sharedFile("videos/pan.mp4")))
        var lowest = [Int: Float]()
        for await result in session.results {
            let frame = result.frame!
            lowest[frame] = result.boxes.map(\.conf).min() ?? 1
            if frame == 1 { session.configuration.confidenceThreshold = 0.9 }
            if frame == 4 { session.stop() }
        }
        XCTAssertEqual(lowest.keys.sorted(), [0, 1, 2, 3, 4])
        XCTAssertLessThan(min(lowest[0]!, lowest[1]!), 0.9, "the first frames have a box below 0.9")
        for frame in 2...4 { XCTAssertGreaterThanOrEqual(lowest[frame]!, 0.9, "frame \(frame)") }
        XCTAssertEqual(session.configuration.confidenceThreshold, 0.9)
        XCTAssertEqual(model.configuration.confidenceThreshold, 0.25)
    }

    /// An invalid setting ends the session at the next frame with the model's error.
    func testInvalidConfigurationEndsTheSession() async throws {
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")))
        var frames = [Int]()
        for await result in session.results {
            frames.append(result.frame!)
            session.configuration.confidenceThreshold = 2
        }
        XCTAssertEqual(frames, [0])
        XCTAssertEqual(session.error as? YOLOError, .invalidConfiguration(field: "confidenceThreshold", value: "2.0", reason: "must be in 0…1"))
    }

    /// Detect → segment on a running video: the frames go on counting, the task changes.
    func testModelSwapAppliesToNextFrame() async throws {
        let segmenter = try Fixtures.model("yolo26n-seg", imageSize: 320)
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 320), source: .video(try sharedFile("videos/pan.mp4")))
        var tasks = [YOLOTask]()
        var hasMasks = [Bool]()
        for await result in session.results {
            XCTAssertEqual(result.frame, tasks.count)
            tasks.append(result.task)
            hasMasks.append(!result.masks.isEmpty)
            if result.frame == 1 { session.model = segmenter }
            if result.frame == 3 { session.stop() }
        }
        XCTAssertEqual(tasks, [.detect, .detect, .segment, .segment])
        XCTAssertEqual(hasMasks, [false, false, true, true])
        XCTAssertTrue(session.model === segmenter)
    }

    func testStopEndsTheStreamEarly() async throws {
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(try sharedFile("videos/pan.mp4")))
        var count = 0
        for await result in session.results {
            count += 1
            if result.frame == 2 { session.stop() }
        }
        XCTAssertEqual(count, 3)
        XCTAssertNil(session.error)
    }

    /// A live source faster than inference loses its stale frames by default, and says how many.
    func testLiveSourceDropsStaleFrames() async throws {
        let image = try Image(pixels: [UInt8](repeating: 90, count: 64 * 48 * 3), width: 64, height: 48, format: .bgr)
        let (frames, feed) = AsyncStream.makeStream(of: Image.self)
        for _ in 0..<40 { feed.yield(image) }
        feed.finish()
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .frames(frames))
        var indices = [Int]()
        for await result in session.results {
            indices.append(result.frame!)
            // Inference slower than the source.
            try await Task.sleep(for: .milliseconds(20))
        }
        XCTAssertGreaterThan(session.droppedFrames, 0)
        XCTAssertEqual(indices.count + session.droppedFrames, 40)
        XCTAssertEqual(indices, indices.sorted())
        XCTAssertEqual(indices.last, 39, "the newest frame is never dropped")
    }

    /// The task asked of a session is checked at `init`, and detect from a segment model gives
    /// boxes alone, as `predict(_:task:)` does.
    func testTaskIsCheckedAtInitAndApplied() async throws {
        let image = try Image(pixels: [UInt8](repeating: 90, count: 64 * 48 * 3), width: 64, height: 48, format: .bgr)
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .frames(AsyncStream { nil }),
                                             task: .segment)) { error in
            XCTAssertEqual(error as? YOLOError, .taskMismatch(model: "yolo26n.safetensors", task: "detect", requested: "segment"))
        }
        let session = try YOLOSession(model: try Fixtures.model("yolo26n-seg", imageSize: 64), source: .frames(AsyncStream { image }),
                                      task: .detect)
        for await result in session.results {
            XCTAssertEqual(result.task, .detect)
            break
        }
    }

    func testFrameIsEncodedOnlyWhenSet() throws {
        var result = try JSONDecoder().decode(Results.self, from: Data(#"{"orig_shape": [2, 2], "boxes": {"xyxy": [], "conf": [], "cls": []}}"#.utf8))
        XCTAssertFalse(String(decoding: try JSONEncoder().encode(result), as: UTF8.self).contains("frame"))
        result.frame = 7
        let json = try JSONEncoder().encode(result)
        XCTAssertTrue(String(decoding: json, as: UTF8.self).contains(#""frame":7"#))
        XCTAssertEqual(try JSONDecoder().decode(Results.self, from: json).frame, 7)
    }

    /// `source` switched mid-session: every result after the first of the new source is from it,
    /// its frames numbered from 0, none lost (a file); the tracker starts anew (IDs from 1); the
    /// results carry the video's time.
    func testSourceSwitchMidSession() async throws {
        let scratch = try Fixtures.temporaryDirectory(self)
        let first = scratch.appendingPathComponent("first.mp4"), second = scratch.appendingPathComponent("second.mp4")
        for (url, filter) in [(first, "scale=640:360"), (second, "scale=320:180")] {
            let ffmpeg = try runTool(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", try sharedFile("videos/pan.mp4").path, "-t", "0.4",
                                      "-vf", filter, "-an", url.path], stderr: true)
            XCTAssertEqual(ffmpeg.status, 0, ffmpeg.output)
        }
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 320), source: .video(first), tracker: .bytetrack)
        var shapes = [[Int]](), frames = [Int](), ids = [[Int]](), times = [FrameTime?]()
        for await result in session.results {
            shapes.append(result.originalShape)
            frames.append(result.frame!)
            ids.append(result.boxes.compactMap(\.id))
            times.append(result.time)
            if shapes.count == 2 { session.source = .video(second) }
        }
        XCTAssertNil(session.error)
        let switched = try XCTUnwrap(shapes.firstIndex(of: [180, 320]))
        XCTAssertGreaterThanOrEqual(switched, 2)
        XCTAssertEqual(shapes[..<switched].filter { $0 != [360, 640] }, [])
        XCTAssertEqual(shapes[switched...].filter { $0 != [180, 320] }, [], "nothing from the first source after the switch")
        XCTAssertEqual(Array(frames[..<switched]), Array(0..<switched))
        XCTAssertEqual(Array(frames[switched...]), Array(0..<10), "the second video's 10 frames, from 0")
        XCTAssertEqual(session.frameCount, 10)
        XCTAssertEqual(times[switched + 5], .offset(0.2), "frame 5 of a 25 fps video")
        let before = Set(ids[..<switched].joined()), after = ids[switched]
        XCTAssertFalse(before.isEmpty)
        XCTAssertFalse(after.isEmpty)
        XCTAssertEqual(Set(after), Set(1...after.count), "a new tracker: IDs from 1")
    }

    /// `init(model:camera:)` opens `/dev/video<n>`; a missing camera is a typed error naming it.
    func testCameraNames() throws {
        XCTAssertEqual([YOLOSession.Camera.back, .front, .device(3), .path("/dev/v4l/by-id/cam")].map(\.path),
                       ["/dev/video0", "/dev/video1", "/dev/video3", "/dev/v4l/by-id/cam"])
        XCTAssertThrowsError(try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), camera: .device(57))) { error in
            guard case let .cameraNotFound(device, _)? = error as? SourceError else { return XCTFail("\(error)") }
            XCTAssertEqual(device, "/dev/video57")
        }
    }
}

import Foundation
import Synchronization
import TestSupport
import XCTest
import YOLOCore

/// Live sources: which sources are live, the ffmpeg arguments of cameras, the reconnection
/// policy, and a broadcast cut and reconnected under a session.
final class LiveSourceTests: XCTestCase {
    /// As Ultralytics' `check_source`: stream protocols whatever the path, http(s) without a
    /// media extension; files never.
    func testLiveAsUltralyticsDecides() {
        for live in ["rtsp://cam/stream.mp4", "rtmp://host/app", "tcp://10.0.0.2:5000", "udp://239.0.0.1:1234", "srt://host:9000",
                     "http://cam.local/live", "https://host/video?id=3", "HTTP://HOST/LIVE"] {
            XCTAssertTrue(VideoInput.isLive(URL(string: live)!), live)
        }
        for file in ["http://host/clip.mp4", "https://host/a/b.MKV", "http://host/bus.jpg", "ftp://host/clip"] {
            XCTAssertFalse(VideoInput.isLive(URL(string: file)!), file)
        }
        XCTAssertFalse(VideoInput.isLive(URL(fileURLWithPath: "/tmp/live")))
    }

    /// Live inputs skip ffmpeg's 5-second analysis; files keep it.
    func testLiveInputsStartWithoutAnalysis() {
        let live = VideoInput(URL(string: "rtsp://cam/live")!, timeout: 2)
        XCTAssertEqual(live.arguments, ["-rw_timeout", "2000000", "-timeout", "2000000", "-probesize", "32768", "-analyzeduration", "0",
                                        "-i", "rtsp://cam/live"])
        XCTAssertEqual(VideoInput(URL(fileURLWithPath: "/v/clip.mp4"), timeout: 10).arguments, ["-rw_timeout", "10000000", "-i", "/v/clip.mp4"])
    }

    /// The source strings that name a camera: as `yolo predict --source` and `yolo serve
    /// --source` read them.
    func testCameraFromSource() {
        XCTAssertEqual(YOLOSession.Camera(source: "0"), .device(0))
        XCTAssertEqual(YOLOSession.Camera(source: "12"), .device(12))
        XCTAssertEqual(YOLOSession.Camera(source: "/dev/video2"), .path("/dev/video2"))
        XCTAssertEqual(YOLOSession.Camera(source: "3")?.path, "/dev/video3")
        for other in ["", "-1", "٣", "0.5", "clip.mp4", "rtsp://cam/0", "/dev/sda"] {
            XCTAssertNil(YOLOSession.Camera(source: other), other)
        }
    }

    func testCameraArguments() {
        let plain = VideoInput(camera: "/dev/video0", frameSize: nil, frameRate: nil)
        XCTAssertTrue(plain.isLive)
        XCTAssertEqual(plain.arguments, ["-f", "v4l2", "-i", "/dev/video0"])
        XCTAssertEqual(VideoInput(camera: "/dev/video2", frameSize: (1280, 720), frameRate: 29.97).arguments,
                       ["-f", "v4l2", "-video_size", "1280x720", "-framerate", "29.97", "-i", "/dev/video2"])
    }

    func testMissingCameraAndBadPolicyAreErrors() throws {
        let model = try Fixtures.model("yolo26n", imageSize: 64)
        XCTAssertThrowsError(try YOLOSession(model: model, source: .camera(.device(57)))) { error in
            guard case let .cameraNotFound(device, _) = error as? SourceError else { return XCTFail("\(error)") }
            XCTAssertEqual(device, "/dev/video57")
            XCTAssertTrue(error.localizedDescription.hasPrefix("no camera at /dev/video57: "), error.localizedDescription)
        }
        for (policy, field, value) in [(ReconnectPolicy(attempts: -1), "reconnect attempts", "-1"), (ReconnectPolicy(timeout: 0), "stream timeout", "0.0")] {
            XCTAssertThrowsError(try YOLOSession(model: model, source: .video(try sharedFile("videos/pan.mp4")), reconnect: policy)) { error in
                guard case let .invalidConfiguration(f, v, _) = error as? YOLOError else { return XCTFail("\(error)") }
                XCTAssertEqual([f, v], [field, value])
            }
        }
    }

    /// At once, then 0.5 s doubling to 8 s: five attempts take 7.5 s.
    func testBackoff() {
        XCTAssertEqual((0..<8).map(ReconnectPolicy.delay), [0, 0.5, 1, 2, 4, 8, 8, 8])
    }

    /// A broadcast cut for 2 s is reopened once, with backoff: `reconnects` and `onReconnect`
    /// say so, and frames keep their numbers.
    func testCutBroadcastIsReconnected() async throws {
        let directory = try Fixtures.temporaryDirectory(self)
        let file = directory.appendingPathComponent("pan.ts")
        let ffmpeg = try runTool(["ffmpeg", "-nostdin", "-v", "error", "-i", try sharedFile("videos/pan.mp4").path, "-c:v", "libx264",
                                  "-preset", "ultrafast", "-g", "12", "-f", "mpegts", file.path], stderr: true)
        XCTAssertEqual(ffmpeg.status, 0, ffmpeg.output)
        let broadcast = try Broadcast(file, duration: 6, speed: 4)
        defer { broadcast.close() }
        broadcast.cut(at: 0.5, for: 2)
        let events = Mutex([Reconnection]())
        let policy = ReconnectPolicy { event in events.withLock { $0.append(event) } }
        let session = try YOLOSession(model: try Fixtures.model("yolo26n", imageSize: 64), source: .video(broadcast.url),
                                      dropsStaleFrames: false, reconnect: policy)
        XCTAssertTrue(session.isLive)
        var frames = [Int]()
        for await result in session.results {
            frames.append(result.frame!)
            if frames.count == 130 { session.stop() }
        }
        XCTAssertNil(session.error)
        XCTAssertEqual(frames, Array(0..<130))
        XCTAssertEqual(session.reconnects, 1)
        let reconnections = events.withLock { $0 }
        XCTAssertEqual(reconnections.map(\.source), [broadcast.url.absoluteString])
        XCTAssertEqual(reconnections.map(\.reason), ["the stream ended"])
        // Refused at once and after 0.5 s (within the cut, which came before the loss was seen);
        // taken at 1.5 s or 3.5 s.
        XCTAssertGreaterThanOrEqual(reconnections.first?.outage ?? 0, 1.5)
    }
}

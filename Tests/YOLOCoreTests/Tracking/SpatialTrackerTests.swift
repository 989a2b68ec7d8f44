import Foundation
import XCTest
import YOLOCore

/// The spatial lifecycle tracker, rule by rule, on synthetic boxes.
final class SpatialTrackerTests: XCTestCase {
    private func box(_ x: Float, _ y: Float, size: Float = 100, conf: Float = 0.9, cls: Int = 0) -> Box {
        Box(xyxy: [x, y, x + size, y + size], conf: conf, cls: cls, name: cls == 0 ? "person" : "car", originalShape: [1080, 1920])
    }

    func testConfirmationOnTheThirdConsecutiveFrame() {
        var tracker = ObjectTracker(.spatial)
        XCTAssertEqual(tracker.update([box(100, 100)]), [])
        XCTAssertEqual(tracker.tracks.map(\.state), [.candidate])
        XCTAssertEqual(tracker.update([box(102, 100)]), [])
        XCTAssertEqual(tracker.tracks.map(\.state), [.candidate])
        let third = tracker.update([box(104, 100)])
        XCTAssertEqual(third.map(\.id), [1])
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed])
        XCTAssertEqual(tracker.tracks.map(\.id), [1])
        XCTAssertEqual(tracker.update([box(106, 100)]).map(\.id), [1])
    }

    func testCandidateMissedOnceIsDropped() {
        var tracker = ObjectTracker(.spatial)
        _ = tracker.update([box(100, 100)])
        _ = tracker.update([box(100, 100)])
        XCTAssertEqual(tracker.update([]), [])
        XCTAssertTrue(tracker.tracks.isEmpty, "dropped after one miss")
        // It starts over: three more consecutive frames to confirm, and the first ID.
        XCTAssertEqual(tracker.update([box(100, 100)]), [])
        XCTAssertEqual(tracker.update([box(100, 100)]), [])
        XCTAssertEqual(tracker.update([box(100, 100)]).map(\.id), [1])
    }

    private func confirmed(_ configuration: TrackerConfiguration = .spatial, at b: Box) -> ObjectTracker {
        var tracker = ObjectTracker(configuration)
        for _ in 0..<3 { _ = tracker.update([b]) }
        return tracker
    }

    func testStaleAfterFifteenMissesAndRecapturedWithItsID() {
        var tracker = confirmed(at: box(500, 300))
        for miss in 1...15 {
            XCTAssertEqual(tracker.update([]), [])
            XCTAssertEqual(tracker.tracks.map(\.state), [miss < 15 ? .confirmed : .stale], "miss \(miss)")
        }
        XCTAssertEqual(tracker.tracks.first?.id, 1, "a stale track is still listed")
        XCTAssertEqual(tracker.tracks.first?.framesSinceSeen, 15)
        for _ in 0..<20 { XCTAssertEqual(tracker.update([]), []) }
        // Back 40 px away (0.28 of its diagonal, within the recapture distance of 0.5).
        let back = tracker.update([box(540, 300)])
        XCTAssertEqual(back.map(\.id), [1], "recaptured under its ID")
        XCTAssertEqual(back.first?.xyxy, [540, 300, 640, 400], "at the new position, not averaged with the old")
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed])
    }

    func testRecaptureOnlyNearbyAndWithinTheClass() {
        var tracker = confirmed(at: box(500, 300))
        for _ in 0..<15 { _ = tracker.update([]) }
        // Too far (1.4 diagonals) and another class nearby: neither is the stale track.
        XCTAssertEqual(tracker.update([box(700, 300), box(500, 300, cls: 1)]), [])
        XCTAssertEqual(tracker.tracks.map(\.state), [.stale, .candidate, .candidate])
    }

    func testLostAfterNinetyMissesThenANewID() {
        var tracker = confirmed(at: box(500, 300))
        for miss in 1..<90 {
            _ = tracker.update([])
            XCTAssertTrue(tracker.removedTracks.isEmpty, "miss \(miss)")
        }
        XCTAssertEqual(tracker.tracks.map(\.state), [.stale])
        _ = tracker.update([])
        XCTAssertTrue(tracker.tracks.isEmpty, "gone after 90 misses")
        XCTAssertEqual(tracker.removedTracks.map(\.state), [.lost])
        XCTAssertEqual(tracker.removedTracks.map(\.id), [1])
        XCTAssertEqual(tracker.update([box(500, 300)]), [])
        XCTAssertEqual(tracker.update([box(500, 300)]), [])
        XCTAssertEqual(tracker.update([box(500, 300)]).map(\.id), [2], "a new track, a new ID")
    }

    func testFastMotionIsMatchedByTheSecondStage() {
        var tracker = confirmed(at: box(100, 300))
        // 45 px a frame: IoU with the last box about 0.4, far below 0.75.
        for step in 1...10 {
            let ids = tracker.update([box(100 + 45 * Float(step), 300)]).map(\.id)
            XCTAssertEqual(ids, [1], "step \(step)")
        }
        XCTAssertEqual(tracker.tracks.count, 1)
        // A box more than a diagonal away is another object.
        _ = tracker.update([box(1400, 300)])
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed, .candidate])
    }

    func testConfidenceFloor() {
        var tracker = ObjectTracker(.spatial)
        for _ in 0..<5 { XCTAssertEqual(tracker.update([box(100, 100, conf: 0.34)]), []) }
        XCTAssertTrue(tracker.tracks.isEmpty, "below 0.35 starts nothing")
        tracker = confirmed(at: box(100, 100, conf: 0.35))
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed])
        // A weak detection may continue a track.
        XCTAssertEqual(tracker.update([box(100, 100, conf: 0.2)]).map(\.id), [1])
    }

    func testMaxTracksDropsTheWeakestCandidatesFirst() {
        var configuration = TrackerConfiguration.spatial
        configuration.maxTracks = 3
        var tracker = confirmed(configuration, at: box(0, 0, conf: 0.4))
        _ = tracker.update([box(0, 0, conf: 0.4), box(300, 0, conf: 0.9), box(600, 0, conf: 0.5), box(900, 0, conf: 0.7)])
        XCTAssertEqual(tracker.tracks.count, 3)
        XCTAssertEqual(tracker.tracks.map(\.state), [.confirmed, .candidate, .candidate])
        XCTAssertEqual(tracker.tracks.map { $0.box.xyxy[0] }, [0, 300, 900], "the 0.5 candidate went, not the 0.4 confirmed track")
    }

    func testSmoothing() {
        var configuration = TrackerConfiguration.spatial
        configuration.confirmationFrames = 1
        configuration.smoothing = 0.5
        var tracker = ObjectTracker(configuration)
        XCTAssertEqual(tracker.update([box(100, 100, conf: 0.5)]).first?.xyxy, [100, 100, 200, 200])
        let second = tracker.update([Box(xyxy: [120, 110, 240, 210], conf: 0.9, cls: 0, name: "person", originalShape: [1080, 1920])])
        XCTAssertEqual(second.first?.xyxy, [110, 105, 220, 205], "centre and size halfway")
        XCTAssertEqual(second.first?.conf ?? 0, 0.7, accuracy: 1e-6)
        configuration.smoothing = 1
        tracker = ObjectTracker(configuration)
        _ = tracker.update([box(100, 100)])
        XCTAssertEqual(tracker.update([box(130, 100)]).first?.xyxy, [130, 100, 230, 200], "1 smooths nothing")
    }

    func testYAMLForm() throws {
        let yaml = """
            tracker_type: spatial
            min_detection_confidence: 0.4
            high_iou_threshold: 0.8
            confirmation_frames: 2
            stale_frames: 10
            lost_frames: 60
            recapture_distance: 1.5
            smoothing: 0.3
            max_tracks: 20
            """
        var expected = TrackerConfiguration.spatial
        expected.minDetectionConfidence = 0.4
        expected.highIoUThreshold = 0.8
        expected.confirmationFrames = 2
        expected.staleFrames = 10
        expected.lostFrames = 60
        expected.recaptureDistance = 1.5
        expected.smoothing = 0.3
        expected.maxTracks = 20
        XCTAssertEqual(try TrackerConfiguration(yaml: yaml), expected)
        expected.maxTracks = nil
        XCTAssertEqual(try TrackerConfiguration(yaml: yaml.replacingOccurrences(of: "max_tracks: 20", with: "max_tracks: null")), expected)
        XCTAssertEqual(try TrackerConfiguration(named: "spatial"), .spatial)
        XCTAssertEqual(TrackerConfiguration.spatial.algorithm, .spatial)
        typealias E = TrackerConfigurationError
        for (text, error) in [
            (yaml.replacingOccurrences(of: "lost_frames: 60", with: "lost_frames: 5"),
             E.outOfRange(source: "tracker YAML", key: "lost_frames", value: "5", allowed: "11 or more frames")),
            (yaml.replacingOccurrences(of: "smoothing: 0.3", with: "smoothing: 0"),
             E.outOfRange(source: "tracker YAML", key: "smoothing", value: "0", allowed: "(0, 1]")),
            (yaml + "\ntrack_buffer: 30", E.unknownKey(source: "tracker YAML", key: "track_buffer", tracker: "spatial")),
            (yaml.replacingOccurrences(of: "stale_frames: 10\n", with: ""), E.missingKey(source: "tracker YAML", key: "stale_frames")),
        ] {
            XCTAssertThrowsError(try TrackerConfiguration(yaml: text)) { XCTAssertEqual($0 as? E, error) }
        }
        XCTAssertEqual(["candidate", "confirmed", "stale", "lost"].compactMap(Track.State.init(rawValue:)),
                       [.candidate, .confirmed, .stale, .lost])
    }
}

import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Every Ultralytics tracker against Ultralytics 8.4.190's `model.track(source, persist=True,
/// tracker=NAME.yaml)` on pan.mp4: the detector runs once, at `model.track`'s confidence 0.1,
/// and each tracker takes every frame's results (with the frame, for TrackTrack's camera-motion
/// compensation).
final class TrackerParityTests: XCTestCase {
    private struct Reference: Decodable {
        struct Frame: Decodable {
            /// `id` is empty where Ultralytics reports the frame's boxes untracked.
            struct Boxes: Decodable { var xyxy: [[Float]], conf: [Float], cls: [Int], id: [Int] }
            var frame: Int, boxes: Boxes
        }
        var frames: [Frame]
    }

    private static func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    }

    /// How many reference boxes one of ours matches with its class at IoU ≥ 0.99 and the same
    /// ID (none where the reference has none), and how many of ours match no reference box.
    static func compare(_ boxes: [Box], _ expected: (xyxy: [[Float]], cls: [Int], id: [Int]),
                        _ mismatches: inout [String], frame: Int) -> (matched: Int, extra: Int) {
        var unmatched = boxes, matched = 0
        for i in expected.cls.indices {
            let candidates = unmatched.indices.filter { unmatched[$0].cls == expected.cls[i] }
            guard let best = candidates.max(by: { iou(unmatched[$0].xyxy, expected.xyxy[i]) < iou(unmatched[$1].xyxy, expected.xyxy[i]) })
            else {
                mismatches.append("frame \(frame) box \(i): none of ours")
                continue
            }
            let overlap = iou(unmatched[best].xyxy, expected.xyxy[i])
            let id = expected.id.isEmpty ? nil : expected.id[i]
            if overlap >= 0.99 && unmatched[best].id == id {
                matched += 1
            } else {
                mismatches.append("frame \(frame) box \(i): IoU \(overlap), ID \(unmatched[best].id ?? -1) for \(id ?? -1)")
            }
            unmatched.remove(at: best)
        }
        return (matched, unmatched.count)
    }

    func testPanParityOfEveryTracker() async throws {
        let trackers: [(String, TrackerConfiguration)] = [
            ("pan-track-yolo26n.json", .bytetrack),
            ("pan-track-botsort-yolo26n.json", try TrackerConfiguration(named: sharedFile("trackers/botsort-nogmc.yaml").path)),
            ("pan-track-tracktrack-yolo26n.json", .tracktrack),
            ("pan-track-ocsort-yolo26n.json", .ocsort),
            ("pan-track-fasttrack-yolo26n.json", .fasttrack),
            ("pan-track-deepocsort-yolo26n.json", .deepocsort),
        ]
        let references = try trackers.map {
            try JSONDecoder().decode(Reference.self, from: Data(contentsOf: sharedFile("reference/video/" + $0.0))).frames
        }
        var configuration = YOLOConfiguration()
        configuration.confidenceThreshold = 0.1
        let model = try YOLO(contentsOf: weightsFile("yolo26n"), configuration: configuration)
        let session = try YOLOSession(model: model, source: .video(try sharedFile("videos/pan.mp4")))
        var states = trackers.map { ObjectTracker($0.1) }
        var counts = [(expected: Int, matched: Int, extra: Int)](repeating: (0, 0, 0), count: trackers.count)
        var mismatches = [[String]](repeating: [], count: trackers.count)
        var frames = 0
        for await result in session.results {
            XCTAssertNotNil(result.image, "the frame, for camera-motion compensation")
            for k in trackers.indices {
                let boxes = try states[k].update(result).boxes
                guard frames < references[k].count else { continue }
                let e = references[k][frames].boxes
                let (matched, extra) = Self.compare(boxes, (e.xyxy, e.cls, e.id), &mismatches[k], frame: frames)
                counts[k].expected += e.cls.count
                counts[k].matched += matched
                counts[k].extra += extra
            }
            frames += 1
        }
        XCTAssertNil(session.error)
        XCTAssertEqual(frames, 150)
        for (k, (name, _)) in trackers.enumerated() {
            let c = counts[k]
            print("\(name): \(c.matched) of \(c.expected) boxes matched with their IDs, \(c.extra) extra"
                  + (mismatches[k].isEmpty ? "" : "; first: " + mismatches[k].prefix(3).joined(separator: "; ")))
            XCTAssertEqual(references[k].count, 150, name)
            XCTAssertGreaterThanOrEqual(Double(c.matched), 0.99 * Double(c.expected), "\(name): \(mismatches[k].prefix(5))")
            XCTAssertLessThanOrEqual(Double(c.extra), 0.01 * Double(c.expected), name)
        }
    }

    /// Rotated boxes through ByteTrack and OC-SORT against Ultralytics tracking yolo26n-obb on a
    /// pan over boats.jpg (`scripts/make-obb-track-reference`): ≥ 99 % of the reference's boxes
    /// matched by one of ours of its class with probabilistic IoU ≥ 0.99 and its ID, ≤ 1 % extra.
    func testOBBTrackingParity() throws {
        struct Reference: Decodable {
            struct Frame: Decodable {
                struct OBB: Decodable { var xywhr: [[Float]], conf: [Float], cls: [Int], id: [Int] }
                var frame: Int, obb: OBB
            }
            var frames: [Frame]
        }
        var configuration = YOLOConfiguration()
        configuration.confidenceThreshold = 0.1
        let model = try YOLO(contentsOf: weightsFile("yolo26n-obb"), configuration: configuration)
        let boats = try Image(contentsOf: sharedFile("images/boats.jpg"))
        let frames = try (0..<20).map { i -> Image in
            var pixels = [UInt8]()
            pixels.reserveCapacity(960 * 540 * 3)
            for y in 4 * i..<4 * i + 540 {
                let row = (y * boats.width + 8 * i) * 3
                pixels += boats.pixels[row..<row + 960 * 3]
            }
            return try Image(pixels: pixels, width: 960, height: 540, format: .rgb)
        }
        let results = try frames.map { try model($0) }
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures")
        for name in ["bytetrack", "ocsort"] {
            let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf:
                fixtures.appendingPathComponent("obb-track-\(name).json"))).frames
            XCTAssertEqual(reference.count, 20)
            var tracker = ObjectTracker(try TrackerConfiguration(named: name))
            var expected = 0, matched = 0, extra = 0, mismatches = [String]()
            for (k, result) in results.enumerated() {
                let tracked = try tracker.update(result)
                XCTAssertTrue(tracked.boxes.isEmpty)
                var ours = tracked.obb
                let e = reference[k].obb
                for i in e.cls.indices {
                    expected += 1
                    let want = RotatedBox(cx: e.xywhr[i][0], cy: e.xywhr[i][1], w: e.xywhr[i][2], h: e.xywhr[i][3], angle: e.xywhr[i][4])
                    func overlap(_ b: OrientedBox) -> Float {
                        probIoU(RotatedBox(cx: b.xywhr[0], cy: b.xywhr[1], w: b.xywhr[2], h: b.xywhr[3], angle: b.xywhr[4]), want)
                    }
                    guard let best = ours.indices.filter({ ours[$0].cls == e.cls[i] }).max(by: { overlap(ours[$0]) < overlap(ours[$1]) })
                    else {
                        mismatches.append("frame \(k) box \(i): none of ours")
                        continue
                    }
                    let id = e.id.isEmpty ? nil : e.id[i]
                    if overlap(ours[best]) >= 0.99 && ours[best].id == id && abs(ours[best].conf - e.conf[i]) <= 0.01 {
                        matched += 1
                    } else {
                        mismatches.append("frame \(k) box \(i): probIoU \(overlap(ours[best])), ID \(ours[best].id ?? -1) for \(id ?? -1)")
                    }
                    ours.remove(at: best)
                }
                extra += ours.count
            }
            print("boats pan \(name): \(matched) of \(expected) rotated boxes matched with their IDs, \(extra) extra"
                  + (mismatches.isEmpty ? "" : "; first: " + mismatches.prefix(3).joined(separator: "; ")))
            XCTAssertGreaterThanOrEqual(Double(matched), 0.99 * Double(expected), "\(name): \(mismatches.prefix(5))")
            XCTAssertLessThanOrEqual(Double(extra), 0.01 * Double(expected), name)
        }
    }
}

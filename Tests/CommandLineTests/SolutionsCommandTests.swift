import Foundation
import TestSupport
import XCTest

/// `yolo solutions`: per-frame records, crossing events, the annotated video and the summary.
final class SolutionsCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private func yolo(_ arguments: [String]) throws -> CommandResult {
        try runCommand(executable, ["solutions"] + arguments, in: scratch,
                       environment: ["YOLO_WEIGHTS_DIR": try weightsDirectory().path, "YOLO_CACHE_DIR": scratch.path])
    }

    /// Counting through the polygon on pan.mp4: every frame's record as Ultralytics' counts, one
    /// CSV row per counted track, the video of every frame, the totals in the summary.
    func testCountMatchesUltralytics() throws {
        let result = try yolo(["count", "--source", try sharedFile("videos/pan.mp4").path, "--region", "160,90,480,90,480,270,160,270",
                               "--save-json", "count.json", "--save-csv", "events.csv", "--save", "--quiet", "--tracker", "bytetrack"])
        XCTAssertEqual(result.status, 0, result.stderr)
        struct Frame: Decodable, Equatable {
            struct Directions: Decodable, Equatable { var IN: Int, OUT: Int }
            var frame: Int, `in`: Int, out: Int, classwise: [String: Directions]
        }
        struct Reference: Decodable { var frames: [Frame] }
        let ours = try JSONDecoder().decode([Frame].self, from: Data(contentsOf: scratch.appendingPathComponent("count.json")))
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf: sharedFile("reference/video/pan-count-region-yolo26n.json")))
        XCTAssertEqual(ours, reference.frames)
        let rows = try String(contentsOf: scratch.appendingPathComponent("events.csv"), encoding: .utf8).split(separator: "\n")
        XCTAssertEqual(rows.first, "frame,id,class,name,direction")
        XCTAssertEqual(rows.count, 1 + 6, "3 in and 3 out")
        XCTAssertEqual(rows.filter { $0.hasSuffix(",in") }.count, 3)
        XCTAssertTrue(rows[1].hasPrefix("1,"), "the first crossings are on frame 1: \(rows[1])")
        XCTAssertTrue(result.stdout.contains("150 frames, in 3, out 3 (person: IN 2 OUT 3, tie: IN 1 OUT 0)"), result.stdout)
        let video = scratch.appendingPathComponent("runs/solutions/exp/pan.mp4")
        XCTAssertGreaterThan(try XCTUnwrap(FileManager.default.attributesOfItem(atPath: video.path)[.size] as? Int), 10_000)
    }

    /// The zone's tracks: the model sees each frame masked outside the zone
    /// (`YOLOSession.frameTransform`), so every frame's track IDs are Ultralytics' `TrackZone`'s.
    func testTrackZoneMatchesUltralytics() throws {
        let result = try yolo(["trackzone", "--source", try sharedFile("videos/pan.mp4").path,
                               "--region", "160,90,480,90,480,270,160,270", "--stream", "--tracker", "bytetrack"])
        XCTAssertEqual(result.status, 0, result.stderr)
        struct Frame: Decodable, Equatable { var frame: Int, ids: [Int] }
        struct Reference: Decodable {
            struct Zone: Decodable { var frames: [Frame] }
            var trackzone: Zone
        }
        let ours = try result.stdout.split(separator: "\n").map { try JSONDecoder().decode(Frame.self, from: Data($0.utf8)) }
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fixtures/solutions/pan-solutions-yolo26n.json")
        let reference = try JSONDecoder().decode(Reference.self, from: Data(contentsOf: fixture)).trackzone.frames
        XCTAssertEqual(ours, reference)
        XCTAssertTrue(result.stderr.hasPrefix("150 frames, most tracks in the zone at once 5\n"), result.stderr)
    }

    /// Mistakes are one-line errors naming the value, before any inference.
    func testArgumentErrors() throws {
        let pan = try sharedFile("videos/pan.mp4").path
        let cases: [([String], String)] = [
            (["count", "--source", pan, "--region", "1,2,3"], "Error: region 1,2,3: not a list of x,y pairs such as 320,0,320,360\n"),
            (["queue", "--source", pan, "--region", "0,0,10,10"],
             "Error: region (0.0, 0.0), (10.0, 10.0): a queue needs a polygon of three or more points\n"),
            (["speed", "--source", pan, "--fps", "0"], "Error: fps = 0.0: must be a positive number\n"),
            (["queue", "--source", pan, "--save-csv", "e.csv"],
             "Error: --save-csv writes counted crossings: use it with count, or heatmap with --region\n"),
            (["count", "--source", "missing.mp4"], "Error: source missing.mp4 does not exist\n"),
        ]
        for (arguments, message) in cases {
            let result = try yolo(arguments)
            XCTAssertEqual(result.status, 1, "\(arguments)")
            XCTAssertEqual(result.stderr, message, "\(arguments)")
        }
    }
}

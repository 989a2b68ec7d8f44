import Foundation
import TestSupport
import XCTest
import YOLOCore

/// The solutions on pan.mp4 against Ultralytics 8.4.190's (`../shared/reference/video/pan-count-*`
/// and `Tests/Fixtures/solutions`, from `scripts/make-solution-references`), and their rules on
/// synthetic tracks.
final class SolutionsTests: XCTestCase {
    private struct CountFrame: Decodable {
        var frame: Int, `in`: Int, out: Int, classwise: [String: ObjectCounter.Directions]
    }

    private struct Reference: Decodable {
        struct Frames<T: Decodable>: Decodable { var frames: [T] }
        struct RegionFrame: Decodable { var regions: [String: Int] }
        struct SpeedFrame: Decodable { var speeds: [String: Int] }
        struct QueueFrame: Decodable { var queue: Int }
        struct HeatFrame: Decodable { var heat: Double }
        var region: Frames<RegionFrame>, speed: Frames<SpeedFrame>, queue: Frames<QueueFrame>
        var heatmap: Frames<HeatFrame>
    }

    /// One pass over pan.mp4 at Ultralytics' solution settings (conf 0.25, ByteTrack) feeds every
    /// solution but TrackZone, whose model sees other frames (`SolutionsCommandTests` runs it).
    /// Each frame's counts, speeds, queue and heat equal Ultralytics'.
    func testPanMatchesUltralytics() async throws {
        let decoder = JSONDecoder()
        func counts(_ name: String) throws -> [CountFrame] {
            try decoder.decode(Reference.Frames<CountFrame>.self, from: Data(contentsOf: sharedFile("reference/video/\(name)"))).frames
        }
        let lineReference = try counts("pan-count-line-yolo26n.json"), polygonReference = try counts("pan-count-region-yolo26n.json")
        let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Fixtures/solutions/pan-solutions-yolo26n.json")
        let reference = try decoder.decode(Reference.self, from: Data(contentsOf: fixture))

        let box = try SolutionRegion([[160, 90], [480, 90], [480, 270], [160, 270]])
        var line = ObjectCounter(region: try SolutionRegion([[320, 0], [320, 360]])), polygon = ObjectCounter(region: box)
        var regions = try RegionCounter(regions: [("left", SolutionRegion([[0, 0], [320, 0], [320, 360], [0, 360]])), ("centre", box)])
        var speeds = try SpeedEstimator(metersPerPixel: 0.05, fps: 25, maxSpeed: 120)
        var queue = try QueueManager(region: SolutionRegion([[100, 60], [540, 60], [540, 300], [100, 300]]))
        var heatmap = try Heatmap()
        let model = try Fixtures.model("yolo26n")
        var tracker = ObjectTracker(.bytetrack)
        let session = try YOLOSession(model: model, source: .video(try sharedFile("videos/pan.mp4")))
        XCTAssertEqual(session.configuration.confidenceThreshold, 0.25, "Ultralytics' SolutionConfig conf")
        var frames = 0
        for await result in session.results {
            let i = try XCTUnwrap(result.frame)
            frames += 1
            let tracked = try tracker.update(result), retired = tracker.removedTracks.map(\.id)
            for (counter, expected, name) in [(line.update(tracked, retiredIDs: retired), lineReference[i], "line"),
                                              (polygon.update(tracked, retiredIDs: retired), polygonReference[i], "polygon")] {
                XCTAssertEqual([counter.in, counter.out], [expected.in, expected.out], "\(name) frame \(i)")
                XCTAssertEqual(counter.classwise, expected.classwise, "\(name) frame \(i)")
            }
            XCTAssertEqual(regions.update(tracked).regions, reference.region.frames[i].regions, "region frame \(i)")
            let kmh = speeds.update(tracked, retiredIDs: retired).speeds
            XCTAssertEqual(Dictionary(uniqueKeysWithValues: kmh.map { (String($0), $1) }), reference.speed.frames[i].speeds, "speed frame \(i)")
            XCTAssertEqual(queue.update(tracked, retiredIDs: retired).queue, reference.queue.frames[i].queue, "queue frame \(i)")
            heatmap.update(tracked, retiredIDs: retired)
            XCTAssertEqual(heatmap.heat.reduce(0) { $0 + Double($1) }, reference.heatmap.frames[i].heat, "heat frame \(i)")
        }
        XCTAssertNil(session.error)
        XCTAssertEqual(frames, lineReference.count)
        XCTAssertEqual([line.counts.in, line.counts.out, polygon.counts.in, polygon.counts.out], [0, 1, 3, 3])
    }

    // MARK: synthetic tracks

    /// A frame of boxes centred at the given points (20 × 20), each with its track ID.
    private func frame(_ tracks: [(id: Int?, x: Float, y: Float)], cls: Int = 0, name: String = "person") -> Results {
        Results(task: .detect, originalShape: [360, 640], inputShape: [],
                boxes: tracks.map { Box(xyxy: [$0.x - 10, $0.y - 10, $0.x + 10, $0.y + 10], conf: 0.9, cls: cls, name: name,
                                        originalShape: [360, 640], id: $0.id) },
                image: nil)
    }

    /// The counter's totals after each step of one track through `path`.
    private func run(_ counter: inout ObjectCounter, _ path: [(Float, Float)], id: Int = 1) -> [[Int]] {
        path.map { x, y in
            let c = counter.update(frame([(id, x, y)]))
            return [c.in, c.out]
        }
    }

    func testLineCountsATrackOnce() throws {
        var vertical = ObjectCounter(region: try SolutionRegion([[320, 0], [320, 360]]))
        // Right across (in), back left across, right again: counted once, at the first crossing.
        XCTAssertEqual(run(&vertical, [(300, 100), (330, 100), (310, 100), (340, 100)]), [[0, 0], [1, 0], [1, 0], [1, 0]])
        XCTAssertEqual(vertical.counts.classwise, ["person": .init(in: 1, out: 0)])
        // Leftwards is out; a step ending exactly on the line counts (it touches).
        XCTAssertEqual(run(&vertical, [(340, 50), (320, 50)], id: 2), [[1, 0], [1, 1]])
        XCTAssertEqual(vertical.counts.events.map { "\($0.id) \($0.name) \($0.direction)" }, ["2 person out"])
        XCTAssertEqual(vertical.counts.events.map(\.csvLine), [",2,0,person,out\n"])
        // A step beside the segment's end, past y = 360, does not cross it.
        XCTAssertEqual(run(&vertical, [(300, 370), (340, 370)], id: 3), [[1, 1], [1, 1]])

        // A line closer to horizontal counts vertical motion: down is in, up is out.
        var horizontal = ObjectCounter(region: try SolutionRegion([[0, 180], [640, 200]]))
        XCTAssertEqual(run(&horizontal, [(100, 150), (110, 250)]), [[0, 0], [1, 0]])
        XCTAssertEqual(run(&horizontal, [(500, 250), (400, 150)], id: 2), [[1, 0], [1, 1]])
    }

    func testPolygonCountsEntriesAndFastObjects() throws {
        // Taller than wide: horizontal motion decides; right is in.
        let tall = try SolutionRegion([[300, 0], [340, 0], [340, 360], [300, 360]])
        var counter = ObjectCounter(region: tall)
        // From the left straight over the strip: no centre inside, counted in.
        XCTAssertEqual(run(&counter, [(280, 100), (360, 100)]), [[0, 0], [1, 0]])
        // From the right into it: out.
        XCTAssertEqual(run(&counter, [(360, 200), (320, 200)], id: 2), [[1, 0], [1, 1]])
        // A track inside from its first frame counts on its next, by its motion (right: in).
        XCTAssertEqual(run(&counter, [(310, 300), (315, 300)], id: 3), [[1, 1], [2, 1]])
        // Passing beside the polygon, or along its edge without entering, is no count.
        XCTAssertEqual(run(&counter, [(100, 100), (200, 100), (300, 0), (300, 360)], id: 4), [[2, 1], [2, 1], [2, 1], [2, 1]])
        // Wide: vertical motion decides; down is in.
        var wide = ObjectCounter(region: try SolutionRegion([[0, 170], [640, 170], [640, 190], [0, 190]]))
        XCTAssertEqual(run(&wide, [(100, 100), (90, 260)]), [[0, 0], [1, 0]])
    }

    /// A retired ID is forgotten: its history and its having been counted. Boxes without an ID
    /// (a frame the tracker reported untracked) are ignored.
    func testRetiredIDsAreForgotten() throws {
        let region = try SolutionRegion([[320, 0], [320, 360]])
        var kept = ObjectCounter(region: region), forgetting = ObjectCounter(region: region)
        for (x, retired) in [(300, [Int]()), (340, []), (300, [1]), (340, [])] as [(Float, [Int])] {
            kept.update(frame([(1, x, 100)]))
            forgetting.update(frame([(1, x, 100)]), retiredIDs: retired)
        }
        XCTAssertEqual([kept.counts.in, kept.counts.out], [1, 0])
        // Retired at the third frame, ID 1 starts afresh there and crosses again at the fourth.
        XCTAssertEqual([forgetting.counts.in, forgetting.counts.out], [2, 0])
        var untracked = ObjectCounter(region: region)
        untracked.update(frame([(nil, 300, 100)]))
        XCTAssertEqual(untracked.update(frame([(nil, 340, 100)])).tracks, 0)
        XCTAssertEqual(untracked.counts.in, 0)
    }

    func testRegionsQueueAndSpeed() throws {
        let left = try SolutionRegion([[0, 0], [320, 0], [320, 360], [0, 360]]), all = try SolutionRegion([[0, 0], [640, 0], [640, 360], [0, 360]])
        var regions = try RegionCounter(regions: [("left", left), ("all", all)])
        // A centre on an edge (x = 320) is not inside.
        XCTAssertEqual(regions.update(frame([(1, 100, 100), (2, 320, 100), (3, 500, 100)])).regions, ["left": 1, "all": 3])

        var queue = try QueueManager(region: left)
        XCTAssertEqual(queue.update(frame([(1, 100, 100)])).queue, 0, "a track's first frame never counts")
        XCTAssertEqual(queue.update(frame([(1, 110, 100), (2, 120, 100)])).queue, 1)
        XCTAssertEqual(queue.update(frame([(1, 110, 100), (2, 120, 100)]), retiredIDs: [1]).queue, 1)

        // 10 px a frame at 25 frames/s and 0.05 m per pixel: 40 px over 4 frames, 2 m in 0.16 s,
        // 45 km/h, fixed once measured; 90 km/h capped at 60.
        var speed = try SpeedEstimator(metersPerPixel: 0.05, fps: 25, maxSpeed: 60)
        var reported = [[Int: Int]]()
        for k in 0..<7 { reported.append(speed.update(frame([(1, Float(10 * k), 100), (2, Float(20 * k), 200)])).speeds) }
        XCTAssertEqual(reported, [[:], [:], [:], [:], [1: 45, 2: 60], [1: 45, 2: 60], [1: 45, 2: 60]])
        let json = String(decoding: try JSONEncoder().encode(speed.speeds), as: UTF8.self)
        XCTAssertTrue(json.contains("\"1\":45") && json.contains("\"2\":60"), "IDs as JSON keys: \(json)")
        XCTAssertEqual(speed.update(frame([(2, 0, 0)]), retiredIDs: [1, 2]).speeds, [:], "retired: measured again")
    }

    func testTrackZoneMasksAndHeatmapAccumulates() throws {
        var pixels = [UInt8](repeating: 200, count: 6 * 5 * 3)
        pixels[0] = 7
        let image = try Image(pixels: pixels, width: 6, height: 5, format: .rgb)
        // The hull of these points is the rectangle (1, 1)–(3, 2); the inner point and the
        // fractions (truncated) change nothing.
        let zone = try TrackZone(region: SolutionRegion([[1, 1], [3.9, 1], [2, 1.5], [3, 2], [1, 2.7]]))
        XCTAssertEqual(zone.zone.points.count, 4)
        let kept = (0..<30).filter { zone.masked(image).pixels[$0 * 3] != 0 }
        XCTAssertEqual(kept, [7, 8, 9, 13, 14, 15])
        XCTAssertThrowsError(try TrackZone(region: SolutionRegion([[0, 0], [5, 5], [10, 10]])))

        // A 4 × 4 box at the origin: a disc of radius 2 about (2, 2) within it, 11 pixels, 2 each.
        var heatmap = try Heatmap(decay: 0.5)
        let box = Results(task: .detect, originalShape: [5, 6], inputShape: [],
                          boxes: [Box(xyxy: [0, 0, 4, 4], conf: 0.9, cls: 0, name: "person", originalShape: [5, 6], id: 1)], image: image)
        XCTAssertNil(heatmap.update(box))
        XCTAssertEqual(heatmap.heat.reduce(0, +), 22)
        XCTAssertEqual(heatmap.heat[0 * 6 + 2], 2)
        XCTAssertEqual(heatmap.heat[0], 0)
        heatmap.update(Results(image: image, boxes: []))
        XCTAssertEqual(heatmap.heat.reduce(0, +), 11, "halved")
        let drawn = try heatmap.annotated(Results(image: image, boxes: []))
        // The hottest pixel (level 255, white) over grey 200: (200 + 255) / 2 = 227.5, to even 228.
        XCTAssertEqual(Array(drawn.pixels[(0 * 6 + 2) * 3..<(0 * 6 + 2) * 3 + 3]), [228, 228, 228])
        // A cold pixel (level 0, black): 100.
        XCTAssertEqual(drawn.pixels[(4 * 6 + 5) * 3], 100)
    }

    func testBadArgumentsAreTypedErrors() throws {
        for text in ["320,0,320", "a,b,c,d", "", "1,1,1,1", "0,0,nan,1"] {
            XCTAssertThrowsError(try SolutionRegion(parsing: text), text) { error in
                guard case .invalidRegion? = error as? SolutionError else { return XCTFail("\(error)") }
                XCTAssertFalse(error.localizedDescription.isEmpty)
            }
        }
        XCTAssertEqual(try SolutionRegion(parsing: " 320, 0,320,360").points, [[320, 0], [320, 360]])
        let line = try SolutionRegion([[0, 0], [1, 1]]), square = try SolutionRegion([[0, 0], [1, 0], [1, 1]])
        XCTAssertThrowsError(try QueueManager(region: line))
        XCTAssertThrowsError(try RegionCounter(regions: [("a", line)]))
        XCTAssertThrowsError(try RegionCounter(regions: []))
        XCTAssertThrowsError(try RegionCounter(regions: [("a", square), ("a", square)])) { error in
            XCTAssertEqual(error as? SolutionError, .invalidArgument(name: "regions", value: "a", reason: "the name is given twice"))
        }
        XCTAssertThrowsError(try SpeedEstimator(fps: 0))
        XCTAssertThrowsError(try SpeedEstimator(metersPerPixel: .nan))
        XCTAssertThrowsError(try SpeedEstimator(historyLength: 1))
        XCTAssertThrowsError(try Heatmap(decay: 0))
        XCTAssertThrowsError(try ObjectCounter(region: line).annotated(frame([]))) { error in
            XCTAssertTrue(error.localizedDescription.contains("no image"), error.localizedDescription)
        }
    }

    /// The overlays: the region's outline in its colour, the counts in the top-right corner.
    func testAnnotations() throws {
        let image = try Image(pixels: [UInt8](repeating: 90, count: 640 * 360 * 3), width: 640, height: 360, format: .rgb)
        func tracked(_ x: Float) -> Results {
            Results(task: .detect, originalShape: [360, 640], inputShape: [],
                    boxes: [Box(xyxy: [x - 10, 190, x + 10, 210], conf: 0.9, cls: 0, name: "person", originalShape: [360, 640], id: 1)],
                    image: image)
        }
        func pixel(_ image: Image, _ x: Int, _ y: Int) -> [UInt8] { Array(image.pixels[(y * 640 + x) * 3..<(y * 640 + x) * 3 + 3]) }
        var counter = ObjectCounter(region: try SolutionRegion([[320, 0], [320, 360]]))
        counter.update(tracked(300))
        let before = try counter.annotated(tracked(300))
        counter.update(tracked(340))
        let after = try counter.annotated(tracked(340))
        XCTAssertEqual(pixel(after, 320, 50), [0x7B, 0x00, 0x68], "the line")
        let panel = (0..<60).flatMap { y in (560..<640).map { pixel(after, $0, y) } }
        XCTAssertTrue(panel.contains([255, 255, 255]), "'Person: IN 1 OUT 0' in the corner")
        XCTAssertFalse((0..<60).flatMap { y in (560..<640).map { pixel(before, $0, y) } }.contains([255, 255, 255]), "nothing counted yet")

        var queue = try QueueManager(region: SolutionRegion([[100, 60], [540, 60], [540, 300], [100, 300]]))
        queue.update(tracked(200))
        XCTAssertEqual(pixel(try queue.annotated(tracked(200)), 300, 60), [255, 255, 255])
        var speed = try SpeedEstimator(historyLength: 2)
        speed.update(tracked(200))
        XCTAssertEqual(pixel(try speed.annotated(tracked(200)), 190, 200), [90, 90, 90], "no speed yet: no box")
        speed.update(tracked(210))
        XCTAssertNotEqual(pixel(try speed.annotated(tracked(210)), 200, 200), [90, 90, 90])
        let zone = try TrackZone(region: SolutionRegion([[160, 90], [480, 90], [480, 270], [160, 270]]))
        XCTAssertEqual(pixel(try zone.annotated(tracked(200)), 300, 90), [255, 255, 255])
    }
}

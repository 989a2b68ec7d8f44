import Foundation
import TestSupport
import XCTest
import YOLOCore

/// `Results.csv()`: one row per detection in `csvHeader`'s columns, for every task.
final class CSVTests: XCTestCase {
    func testRowsForBoxesRotatedBoxesAndClasses() async throws {
        let bus = try sharedFile("images/bus.jpg").path
        var detect = try await Fixtures.model("yolo26n").predict(bus)
        var rows = detect.csv().split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        XCTAssertEqual(Results.csvHeader(), "image,frame,class,name,conf,x1,y1,x2,y2,id,source,time")
        XCTAssertEqual(rows.count, detect.boxes.count)
        for (row, box) in zip(rows, detect.boxes) {
            XCTAssertEqual(row.count, 12)
            XCTAssertEqual(Array(row[0...3]), ["bus.jpg", "", Substring(String(box.cls)), Substring(box.name)])
            XCTAssertEqual(row[4...8].map { Float($0)! }, [box.conf] + box.xyxy)
            XCTAssertEqual(row[9], "", "untracked")
            XCTAssertEqual(row[10], "", "a single source")
            XCTAssertEqual(row[11], "", "no time")
        }
        // A list's source index, then the time: seconds into a file, ISO 8601 for a live source.
        detect.source = 1
        detect.time = .offset(2.5)
        XCTAssertTrue(detect.csv().split(separator: "\n").allSatisfy { $0.hasSuffix(",,1,2.500") }, detect.csv())
        detect.source = nil
        detect.time = .wallClock(Date(timeIntervalSince1970: 1_700_000_000.25))
        XCTAssertTrue(detect.csv().split(separator: "\n").allSatisfy { $0.hasSuffix(",,,2023-11-14T22:13:20.250Z") }, detect.csv())
        detect.time = nil
        // Boxes as centre and size.
        XCTAssertEqual(Results.csvHeader(boxes: .xywh), "image,frame,class,name,conf,x,y,w,h,id,source,time")
        rows = detect.csv(boxes: .xywh).split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        XCTAssertEqual(rows.map { $0[5...8].map { Float($0)! } }, detect.boxes.map(\.xywh))
        // Text fields with a comma or a quote are quoted, the quote doubled.
        detect.path = "a,\"b\".jpg"
        detect.frame = 7
        XCTAssertTrue(detect.csv().hasPrefix("\"a,\"\"b\"\".jpg\",7,0,person,"), detect.csv())

        let obb = try await Fixtures.model("yolo26n-obb").predict(try sharedFile("images/boats.jpg").path)
        rows = obb.csv().split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        XCTAssertGreaterThan(obb.obb.count, 0)
        XCTAssertEqual(rows.count, obb.obb.count)
        XCTAssertEqual(rows[0][5...8].map { Float($0)! }, obb.obb[0].xyxy, "the rotated box's enclosing box")

        let classify = try await Fixtures.model("yolo26n-cls").predict(bus)
        XCTAssertEqual(classify.csv(), "bus.jpg,,\(classify.probs!.top1),minibus,\(classify.probs!.top1conf),,,,,,,\n")
    }
}

import Foundation
import XCTest
import YOLOCore

final class DrawingTests: XCTestCase {
    private let gray: [UInt8] = [100, 100, 100]
    private let lime: [UInt8] = [0xCF, 0xFF, 0x1A]  // palette[0]
    private let black: [UInt8] = [0, 0, 0]  // label pill
    private let cyan: [UInt8] = [0x0B, 0xDB, 0xEB]  // palette[1]

    private func canvas(width: Int, height: Int, value: UInt8 = 100) throws -> Image {
        try Image(pixels: [UInt8](repeating: value, count: width * height * 3), width: width, height: height, format: .rgb)
    }

    private func pixel(_ image: Image, _ x: Int, _ y: Int) -> [UInt8] {
        let i = (y * image.width + x) * 3
        return Array(image.pixels[i..<i + 3])
    }

    private func result(_ image: Image, _ boxes: [(xyxy: [Float], cls: Int)]) -> DetectionResult {
        DetectionResult(image: image, boxes: boxes.map {
            Box(xyxy: $0.xyxy, conf: 0.87, cls: $0.cls, name: "person", in: image)
        })
    }

    func testOutlineHasTheClassColourAndTheInteriorIsUntouched() throws {
        let image = try canvas(width: 100, height: 80)
        // Class 21 takes palette[21 % 20]; a 2-pixel line covers edge - 1 and edge.
        let out = try result(image, [([30, 40, 70, 70], 21)]).annotated(lineWidth: 2)
        for y in 41...68 {
            XCTAssertEqual(pixel(out, 29, y), cyan, "left edge, y \(y)")
            XCTAssertEqual(pixel(out, 30, y), cyan, "left edge, y \(y)")
            XCTAssertEqual(pixel(out, 69, y), cyan, "right edge, y \(y)")
            XCTAssertEqual(pixel(out, 70, y), cyan, "right edge, y \(y)")
            XCTAssertEqual(pixel(out, 28, y), gray, "outside left, y \(y)")
            XCTAssertEqual(pixel(out, 71, y), gray, "outside right, y \(y)")
        }
        for x in 29...70 {
            XCTAssertEqual(pixel(out, x, 69), cyan, "bottom edge, x \(x)")
            XCTAssertEqual(pixel(out, x, 70), cyan, "bottom edge, x \(x)")
            XCTAssertEqual(pixel(out, x, 71), gray, "below, x \(x)")
        }
        for y in 41...68 {
            for x in 31...68 {
                XCTAssertEqual(pixel(out, x, y), gray, "interior (\(x), \(y))")
            }
        }
    }

    func testLabelPillSitsAboveTheBoxOrInsideWhenThereIsNoRoom() throws {
        let image = try canvas(width: 200, height: 120)
        // Line width 2 draws the text at scale 2: the pill is 9·2 + 2 pixels tall.
        let out = try result(image, [([30, 60, 150, 110], 0)]).annotated(lineWidth: 2)
        let label = Image.textSize("person 0.87", scale: 2)
        let pillRight = 30 + label.width + 4, pillTop = 60 - (label.height + 2)
        XCTAssertEqual(pixel(out, 30, pillTop), black, "pill top-left corner")
        XCTAssertEqual(pixel(out, pillRight - 1, 58), black, "pill bottom-right corner")
        XCTAssertEqual(pixel(out, 30, pillTop - 1), gray, "above the pill")
        XCTAssertEqual(pixel(out, pillRight, pillTop), gray, "right of the pill")
        var white = 0
        for y in pillTop..<60 {
            for x in 30..<pillRight where pixel(out, x, y) == [255, 255, 255] { white += 1 }
        }
        XCTAssertGreaterThan(white, 50, "white text on the black pill")

        // A box at the top edge has its label inside, hanging from the top line.
        let top = try result(image, [([30, 5, 150, 110], 0)]).annotated(lineWidth: 2)
        XCTAssertEqual(pixel(top, 30, 5 + label.height + 1), black, "pill bottom inside the box")
        XCTAssertEqual(pixel(top, 31, 5 + label.height + 2), gray, "below the inside pill")

        // Labels that would cross the left or right edge are shifted inside.
        let pillWidth = label.width + 4
        let left = try result(image, [([-20, 60, 100, 110], 0)]).annotated(lineWidth: 2)
        XCTAssertEqual(pixel(left, 0, pillTop), black, "pill starts at the left edge")
        XCTAssertEqual(pixel(left, pillWidth, pillTop), gray, "right of the shifted pill")
        let right = try result(image, [([180, 60, 199, 110], 0)]).annotated(lineWidth: 2)
        XCTAssertEqual(pixel(right, 199, pillTop), black, "pill ends at the right edge")
        XCTAssertEqual(pixel(right, 200 - pillWidth, pillTop), black, "pill start")
        XCTAssertEqual(pixel(right, 199 - pillWidth, pillTop), gray, "left of the shifted pill")
    }

    func testBoxesAtAndBeyondTheEdgesDoNotCrash() throws {
        let image = try canvas(width: 64, height: 48)
        let boxes: [(xyxy: [Float], cls: Int)] = [
            ([0, 0, 63, 47], 0), ([-50, -50, 30, 30], 1), ([40, 30, 200, 300], 2), ([100, 100, 200, 200], 3),
            ([50, 40, 10, 5], 4), ([-1e30, -1e30, 1e30, 1e30], -7), ([.nan, 0, 10, 10], 5), ([0, 0, .infinity, 10], 6),
        ]
        let out = try result(image, boxes).annotated()
        XCTAssertEqual(out.pixels.count, image.pixels.count)
        XCTAssertEqual(pixel(out, 0, 30), lime, "full-image box drawn on its left edge")
    }

    func testEmptyResultReturnsTheImageUnchanged() throws {
        let image = try canvas(width: 33, height: 17)
        XCTAssertEqual(try result(image, []).annotated(), image)
    }

    func testLineWidthDefaultsToTheImageSizeAndClampsUserValues() throws {
        // max(round((h + w + 3) / 2 · 0.003), 2): 2 for 640×480, 3 for 1280×720.
        for (width, height, expected) in [(640, 480, 2), (1280, 720, 3)] {
            let out = try result(try canvas(width: width, height: height), [([100, 200, 400, 400], 0)]).annotated()
            let left = (0..<width).filter { pixel(out, $0, 300) == lime }
            XCTAssertEqual(left.count, 2 * expected, "\(width)×\(height): two vertical lines")
        }
        let image = try canvas(width: 640, height: 480)
        let thick = try result(image, [([100, 200, 400, 400], 0)]).annotated(lineWidth: 10)
        XCTAssertEqual((0..<640).filter { pixel(thick, $0, 300) == lime }.count, 6, "clamped to 3")
        XCTAssertThrowsError(try result(image, []).annotated(lineWidth: .nan))
    }

    func testTextStaysInsideItsExtent() throws {
        var image = try canvas(width: 60, height: 30, value: 0)
        let (x, y, scale) = (5, 4, 2)
        image.drawText("Hg", x: x, y: y, scale: scale, color: RGB(0xFFFFFF))
        let size = Image.textSize("Hg", scale: scale)
        XCTAssertEqual(size.width, 22)
        XCTAssertEqual(size.height, 18)
        var ink: [(Int, Int)] = []
        for py in 0..<30 {
            for px in 0..<60 where pixel(image, px, py) != [0, 0, 0] {
                XCTAssertEqual(pixel(image, px, py), [255, 255, 255], "(\(px), \(py))")
                ink.append((px, py))
            }
        }
        // Ink inside the extent and touching all its sides: H's stem, g's right side and tail.
        XCTAssertEqual(ink.map(\.0).min(), x)
        XCTAssertEqual(ink.map(\.0).max(), x + size.width - 1)
        XCTAssertEqual(ink.map(\.1).min(), y)
        XCTAssertEqual(ink.map(\.1).max(), y + size.height - 1)
    }

    func testNonASCIICharactersDrawAsQuestionMarks() throws {
        var accented = try canvas(width: 20, height: 12, value: 0), question = accented
        accented.drawText("é", x: 1, y: 1, scale: 1, color: RGB(0xFFFFFF))
        question.drawText("?", x: 1, y: 1, scale: 1, color: RGB(0xFFFFFF))
        XCTAssertEqual(accented, question)
        XCTAssertNotEqual(accented, try canvas(width: 20, height: 12, value: 0))
    }

    func testResultWithoutImageThrows() throws {
        let json = #"{"orig_shape": [10, 20], "boxes": {"xyxy": [[1, 2, 3, 4]], "conf": [0.5], "cls": [0], "name": ["person"]}}"#
        let decoded = try JSONDecoder().decode(DetectionResult.self, from: Data(json.utf8))
        XCTAssertThrowsError(try decoded.annotated()) { error in
            guard case YOLOError.invalidImage = error else { return XCTFail("unexpected \(error)") }
        }
    }
}

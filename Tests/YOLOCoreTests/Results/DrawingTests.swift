import Foundation
import TestSupport
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

    private func result(_ image: Image, _ boxes: [(xyxy: [Float], cls: Int)]) -> Results {
        Results(image: image, boxes: boxes.map {
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

    /// Ultralytics' `plot(labels:conf:boxes:)`: a label of the confidence alone, of the name
    /// alone, none when both are hidden, and no box at all without boxes.
    func testLabelsConfidencesAndBoxesCanBeLeftOut() throws {
        let image = try canvas(width: 200, height: 120)
        let detection = result(image, [([30, 60, 150, 110], 0)])
        // Along the pill's top row, above the text.
        let pillTop = 60 - (Image.textSize("0", scale: 2).height + 2)
        func pillRight(_ out: Image) -> Int {
            var x = 30
            while pixel(out, x, pillTop) == black { x += 1 }
            return x
        }
        let full = try detection.annotated(lineWidth: 2)
        XCTAssertEqual(pillRight(full), 30 + Image.textSize("person 0.87", scale: 2).width + 4)
        XCTAssertEqual(pillRight(try detection.annotated(lineWidth: 2, labels: false)), 30 + Image.textSize("0.87", scale: 2).width + 4)
        XCTAssertEqual(pillRight(try detection.annotated(lineWidth: 2, conf: false)), 30 + Image.textSize("person", scale: 2).width + 4)
        let bare = try detection.annotated(lineWidth: 2, labels: false, conf: false)
        XCTAssertEqual(pixel(bare, 30, pillTop), gray, "no pill")
        XCTAssertEqual(pixel(bare, 30, 80), lime, "the box is drawn")
        XCTAssertEqual(try detection.annotated(lineWidth: 2, boxes: false), image)
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
        let decoded = try JSONDecoder().decode(Results.self, from: Data(json.utf8))
        XCTAssertThrowsError(try decoded.annotated()) { error in
            guard case YOLOError.invalidImage = error else { return XCTFail("unexpected \(error)") }
        }
    }

    // MARK: segment, pose, obb, classify

    func testMasksBlendHalfwayWithTheirClassColour() throws {
        let image = try canvas(width: 40, height: 60)
        var a = [UInt8](repeating: 0, count: 40 * 60), b = a
        for y in 5..<15 { for x in 5..<20 { a[y * 40 + x] = 1 } }
        for y in 10..<20 { for x in 15..<30 { b[y * 40 + x] = 1 } }
        // The boxes (and their labels) lie below the masks, out of the way.
        let boxes = [Box(xyxy: [1, 45, 38, 58], conf: 0.9, cls: 0, name: "a", in: image),
                     Box(xyxy: [2, 46, 37, 57], conf: 0.8, cls: 1, name: "b", in: image)]
        let masks = [Mask(bitmap: BinaryMask(width: 40, height: 60, dense: a)!), Mask(bitmap: BinaryMask(width: 40, height: 60, dense: b)!)]
        let result = Results(task: .segment, originalShape: [60, 40], inputShape: [], boxes: boxes, masks: masks, image: image)
        let out = try result.annotated(lineWidth: 1)
        // One mask: (100/255 · 0.5 + colour/255 · 0.5) · 255, truncated.
        func half(_ c: UInt8) -> UInt8 { UInt8((Float(100) / 255 * 0.5 + Float(c) / 255 * 0.5) * 255) }
        XCTAssertEqual(pixel(out, 8, 8), lime.map(half))
        XCTAssertEqual(pixel(out, 25, 17), cyan.map(half))
        // Both: image · 0.25 + the larger colour · 0.5 per channel.
        let both = zip(lime, cyan).map { UInt8((Float(100) / 255 * 0.25 + Float(max($0, $1)) / 255 * 0.5) * 255) }
        XCTAssertEqual(pixel(out, 17, 12), both)
        XCTAssertEqual(pixel(out, 35, 25), gray, "outside every mask")
    }

    func testKeypointsDrawDiscsAndLimbsAboveTheThreshold() throws {
        let image = try canvas(width: 100, height: 100)
        var xy = [SIMD2<Float>](repeating: SIMD2(90, 90), count: 17), conf = [Float](repeating: 0.1, count: 17)
        // Shoulders (5, 6) visible with a limb between them; the nose (0) below the threshold.
        xy[5] = SIMD2(20, 50); conf[5] = 0.9
        xy[6] = SIMD2(80, 50); conf[6] = 0.9
        xy[0] = SIMD2(50, 20); conf[0] = 0.2
        let result = Results(task: .pose, originalShape: [100, 100], inputShape: [],
                             keypoints: [Keypoints(xy: xy, conf: conf, in: image)], image: image)
        let out = try result.annotated(lineWidth: 2)
        let blue: [UInt8] = [0, 128, 255]  // pose palette 0 (BGR 255, 128, 0), the shoulders' colour
        let limb: [UInt8] = [0, 128, 255]  // limb 7 (shoulder to shoulder), palette 0
        XCTAssertEqual(pixel(out, 20, 50), blue)
        XCTAssertEqual(pixel(out, 24, 53), blue, "inside the radius-5 disc")
        XCTAssertEqual(pixel(out, 50, 50), limb, "limb between the shoulders")
        XCTAssertEqual(pixel(out, 50, 53), gray, "the limb is ceil(2 / 2) = 1 pixel wide")
        XCTAssertEqual(pixel(out, 50, 20), gray, "nose below 0.25 not drawn")
        XCTAssertEqual(pixel(out, 90, 90), gray, "invisible keypoints not drawn")
    }

    func testRotatedBoxesDrawTheirOutline() throws {
        let image = try canvas(width: 120, height: 120)
        let box = OrientedBox(xywhr: [60, 60, 40, 20, 0], conf: 0.9, cls: 1, name: "ship", in: image)
        let result = Results(task: .obb, originalShape: [120, 120], inputShape: [], obb: [box], image: image)
        let out = try result.annotated(lineWidth: 1)
        XCTAssertEqual(pixel(out, 60, 50), cyan, "top edge")
        XCTAssertEqual(pixel(out, 40, 60), cyan, "left edge")
        XCTAssertEqual(pixel(out, 60, 60), gray, "inside")
        // The label hangs above the first corner (80, 70), shifted left to fit: its last row.
        XCTAssertEqual(pixel(out, 80, 69), black)
        XCTAssertEqual(pixel(out, 119, 69), black)
        XCTAssertNoThrow(try Results(task: .obb, originalShape: [120, 120], inputShape: [],
                                     obb: [OrientedBox(xywhr: [.nan, 0, 1e30, -5, .infinity], conf: 1, cls: 0, name: "x", in: image)],
                                     image: image).annotated())
    }

    func testClassificationDrawsTheTopFiveOnDarkPills() throws {
        let image = try canvas(width: 200, height: 200)
        let probs = Probs(data: [0.1, 0.6, 0.05, 0.2, 0.03, 0.02], names: ["a", "b", "c", "d", "e", "f"])
        XCTAssertEqual(probs.top5, [1, 3, 0, 2, 4])
        let result = Results(task: .classify, originalShape: [200, 200], inputShape: [], probs: probs, image: image)
        XCTAssertEqual(result.summary, "b 0.60, d 0.20, a 0.10, c 0.05, e 0.03, ")
        let out = try result.annotated(lineWidth: 2)
        // round(200 · 0.03) = 6: the first pill starts at (6, 6), 100 blended halfway to 64.
        let dark = UInt8(Float(100) * (1 - 128 / 255) + Float(64) * 128 / 255)
        XCTAssertEqual(pixel(out, 6, 6), [dark, dark, dark])
        XCTAssertEqual(pixel(out, 5, 5), gray)
        var white = 0
        for y in 6..<100 { for x in 6..<60 where pixel(out, x, y) == [255, 255, 255] { white += 1 } }
        XCTAssertGreaterThan(white, 100)
    }

    /// The row-by-row capsule against a per-pixel distance test, on odd segments.
    func testLinesCoverThePixelsWithinHalfTheirWidth() throws {
        var g = SeededGenerator(seed: 26)
        for _ in 0..<40 {
            let a = SIMD2(Float.random(in: -10...50, using: &g), Float.random(in: -10...40, using: &g))
            let b = Bool.random(using: &g) ? a + SIMD2(0, Float.random(in: 0...20, using: &g))
                : SIMD2(Float.random(in: -10...50, using: &g), Float.random(in: -10...40, using: &g))
            let thickness = Int.random(in: 1...4, using: &g)
            var image = try canvas(width: 41, height: 31)
            image.drawLine(a, b, thickness: thickness, color: RGB(0xFFFFFF))
            let r = max(Float(thickness) / 2, 0.5), d = b - a, l2 = (d * d).sum()
            for y in 0..<31 {
                for x in 0..<41 {
                    let p = SIMD2(Float(x), Float(y))
                    let t = l2 > 0 ? min(max(((p - a) * d).sum() / l2, 0), 1) : 0
                    let q = p - (a + t * d), distance = (q * q).sum().squareRoot()
                    // Pixels on the boundary may go either way by rounding.
                    guard abs(distance - r) > 1e-3 else { continue }
                    XCTAssertEqual(pixel(image, x, y) == [255, 255, 255], distance < r, "\(a) → \(b), width \(thickness), (\(x), \(y))")
                }
            }
        }
    }
}

import Foundation
import Tensor
import TestSupport
import XCTest
import YOLOCore
import YOLONet

/// The larger of the x and y distances between two points.
func chebyshev(_ a: SIMD2<Float>, _ b: SIMD2<Float>) -> Float { max(abs(a.x - b.x), abs(a.y - b.y)) }

/// The reference masks (`<image>.masks.safetensors`, one U8 tensor "masks" [n, H_in, W_in]),
/// read here because `SafeTensorsFile` decodes float tensors only.
func referenceMasks(_ url: URL) throws -> (shape: [Int], bytes: [UInt8]) {
    struct Unreadable: Error, CustomStringConvertible { let description: String }
    let data = try Data(contentsOf: url)
    guard data.count >= 8 else { throw Unreadable(description: "\(url.path): too short") }
    let length = data.prefix(8).enumerated().reduce(0) { $0 | Int($1.element) << (8 * $1.offset) }
    guard length > 0, 8 + length <= data.count,
          let header = try JSONSerialization.jsonObject(with: data.subdata(in: 8..<(8 + length))) as? [String: Any],
          let entry = header["masks"] as? [String: Any], entry["dtype"] as? String == "U8",
          let shape = entry["shape"] as? [Int], let offsets = entry["data_offsets"] as? [Int], offsets.count == 2,
          offsets[1] - offsets[0] == shape.reduce(1, *), 8 + length + offsets[1] <= data.count else {
        throw Unreadable(description: "\(url.path): no U8 tensor 'masks'")
    }
    return (shape, [UInt8](data.subdata(in: (8 + length + offsets[0])..<(8 + length + offsets[1]))))
}

/// Segment, pose, obb and classify post-processing fed with Ultralytics 8.4.190's own head
/// outputs (`reference/<model>/<image>.safetensors`) and compared with its final results
/// (`<image>.json`, `<image>.masks.safetensors`): the network is not involved.
final class TaskPostprocessTests: XCTestCase {
    private func reference(_ model: String, _ image: String) throws -> (SafeTensorsFile, Results) {
        let tensors = try SafeTensorsFile(contentsOf: sharedFile("reference/\(model)/\(image).safetensors"))
        let json = try JSONDecoder().decode(Results.self, from: Data(contentsOf: sharedFile("reference/\(model)/\(image).json")))
        return (tensors, json)
    }

    private func transform(_ image: String, imgsz: Int = 640) throws -> LetterboxTransform {
        let decoded = try Image(contentsOf: sharedFile("images/\(image).jpg"))
        return Letterbox(imgsz: imgsz).transform(width: decoded.width, height: decoded.height)
    }

    private func iou(_ a: BinaryMask, _ b: [UInt8]) -> Double {
        let dense = a.dense()
        var inter = 0, union = 0
        for (x, y) in zip(dense, b) {
            if x != 0 && y != 0 { inter += 1 }
            if x != 0 || y != 0 { union += 1 }
        }
        return union == 0 ? 1 : Double(inter) / Double(union)
    }

    func testSegmentMasksBoxesAndOutlinesFromReferenceTensors() throws {
        let (tensors, expected) = try reference("yolo26n-seg", "bus")
        let t = try transform("bus")
        let rows = try tensors.tensor("output.0.0"), protos = try tensors.tensor("output.0.1")
        let raw = selectEndToEnd(rows, YOLOConfiguration())
        let masks = processMasks(protos: protos, coefficients: raw.map(\.extra), boxes: raw.map(\.box),
                                 inputWidth: t.inputWidth, inputHeight: t.inputHeight)
        let reference = try referenceMasks(try sharedFile("reference/yolo26n-seg/bus.masks.safetensors"))
        XCTAssertEqual(reference.shape, [expected.masks.count, t.inputHeight, t.inputWidth])
        let kept = masks.filter { $0.area > 0 }
        XCTAssertEqual(kept.count, expected.masks.count)
        let plane = t.inputHeight * t.inputWidth
        var worstIoU = 1.0, differing = 0
        for (i, mask) in kept.enumerated() {
            let expectedMask = Array(reference.bytes[(i * plane)..<((i + 1) * plane)])
            worstIoU = min(worstIoU, iou(mask, expectedMask))
            differing += zip(mask.dense(), expectedMask).filter { $0 != $1 }.count
            let box = t.scaleBox(raw[i].box)
            for k in 0..<4 { XCTAssertEqual(box[k], expected.boxes[i].xyxy[k], accuracy: 1e-3, "box \(i)") }
        }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99)
        print("segment from reference tensors: worst mask IoU \(worstIoU), \(differing) differing pixels of \(kept.count * plane)")
    }

    /// The outline code on Ultralytics' own masks reproduces its polygons exactly (OpenCV's
    /// contour order, corners, merged segments, scale_coords).
    func testOutlinesOfReferenceMasksEqualUltralyticsPolygons() throws {
        for image in ["bus", "zidane"] {
            let expected = try JSONDecoder().decode(Results.self, from: Data(contentsOf:
                sharedFile("reference/yolo26n-seg/\(image).json")))
            let t = try transform(image)
            let masks = try referenceMasks(try sharedFile("reference/yolo26n-seg/\(image).masks.safetensors"))
            let plane = t.inputHeight * t.inputWidth
            for i in 0..<masks.shape[0] {
                let mask = try XCTUnwrap(BinaryMask(width: t.inputWidth, height: t.inputHeight,
                                                    dense: Array(masks.bytes[(i * plane)..<((i + 1) * plane)])))
                XCTAssertEqual(mask.area, expected.masks[i].area, "\(image) mask \(i) area")
                let outline = maskOutline(mask).map { t.scalePoint($0) }
                XCTAssertEqual(outline, expected.masks[i].xy, "\(image) mask \(i) polygon")
            }
        }
    }

    func testKeypointsFromReferenceTensors() throws {
        let (tensors, expected) = try reference("yolo26n-pose", "bus")
        let t = try transform("bus")
        let raw = selectEndToEnd(try tensors.tensor("output.0"), YOLOConfiguration())
        XCTAssertEqual(raw.count, expected.keypoints.count)
        var worst: Float = 0
        for (d, e) in zip(raw, expected.keypoints) {
            XCTAssertEqual(d.extra.count, 51)
            for k in 0..<17 {
                let xy = t.scalePoint(SIMD2(d.extra[3 * k], d.extra[3 * k + 1]))
                worst = max(worst, chebyshev(xy, e.xy[k]))
                XCTAssertEqual(d.extra[3 * k + 2], e.conf[k], accuracy: 1e-6)
            }
        }
        XCTAssertLessThanOrEqual(worst, 1e-3)
    }

    func testRotatedBoxesFromReferenceTensors() throws {
        let (tensors, expected) = try reference("yolo26n-obb", "boats")
        let t = try transform("boats", imgsz: 1024)
        let raw = selectEndToEnd(try tensors.tensor("output.0"), YOLOConfiguration())
        XCTAssertEqual(raw.count, expected.obb.count)
        var worstBox: Float = 0, worstCorner: Float = 0
        for (d, e) in zip(raw, expected.obb) {
            let b = t.scaleBox(xywh: d.box)
            let box = OrientedBox(xywhr: [b[0], b[1], b[2], b[3], d.extra[0]], conf: d.score, cls: d.cls, name: "", in:
                try Image(pixels: [0, 0, 0], width: 1, height: 1, format: .rgb))
            XCTAssertEqual(d.cls, e.cls)
            for k in 0..<5 { worstBox = max(worstBox, abs(box.xywhr[k] - e.xywhr[k])) }
            for (p, q) in zip(box.xyxyxyxy, e.xyxyxyxy) { worstCorner = max(worstCorner, chebyshev(p, q)) }
        }
        XCTAssertLessThanOrEqual(worstBox, 1e-3)
        XCTAssertLessThanOrEqual(worstCorner, 1e-3)
    }

    func testClassifyPreprocessingIsExactlyUltralytics() throws {
        for image in ["bus", "zidane"] {
            let decoded = try Image(contentsOf: sharedFile("images/\(image).jpg"))
            let input = ClassifyTransform(size: 224)(decoded)
            for model in ["yolo26n-cls", "yolo11n-cls"] {
                let reference = try SafeTensorsFile(contentsOf: sharedFile("reference/\(model)/\(image).safetensors"))
                    .tensor("input")
                XCTAssertEqual(input.shape, reference.shape)
                let worst = zip(input.scalars, reference.scalars).map { abs($0 - $1) * 255 }.max() ?? .infinity
                XCTAssertEqual(worst, 0, "\(model)/\(image): max |Δ|·255")
            }
        }
    }

    func testProbsFromReferenceTensors() throws {
        for image in ["bus", "zidane"] {
            let (tensors, expected) = try reference("yolo26n-cls", image)
            let probs = Probs(data: try tensors.tensor("output.0").scalars, names: [])
            XCTAssertEqual(probs.top5, expected.probs?.top5)
            XCTAssertEqual(probs.top5conf, expected.probs?.top5conf)
        }
    }

    // MARK: crafted inputs

    private func bits(_ rows: String) -> [UInt8] {
        rows.split(separator: "/").flatMap { $0.map { $0 == "1" ? 1 : 0 } }
    }

    /// process_mask and scale_masks on a small case, expected values from Ultralytics 8.4.190
    /// (`ops.process_mask(protos, coef, boxes, (16, 20), upsample=True)`, then
    /// `ops.scale_masks(m[None].float(), (23, 29))[0] > 0.5`).
    func testProcessAndScaleMasksMatchUltralyticsOnACraftedCase() {
        let (c, mh, mw) = (3, 4, 5)
        var protos = [Float]()
        for z in 0..<c { for y in 0..<mh { for x in 0..<mw { protos.append(Float((z * 7 + y * 5 + x * 3) % 11 - 5) / 4) } } }
        let masks = processMasks(protos: Tensor(shape: [1, c, mh, mw], scalars: protos),
                                 coefficients: [[1, -0.5, 0.25], [-1, 0.75, 0.5]],
                                 boxes: [SIMD4(2.5, 1, 17.2, 13), SIMD4(0, 3.7, 9, 16)], inputWidth: 20, inputHeight: 16)
        let expected = [
            "00000000000000000000/00000000111111100000/00000000111111100000/00000000000011000000/00000000000000000000/00011110000000001100/00011110000000001100/00011000000000000000/00010000000000000000/00010000011111100000/00010000111111100000/00011001111110000000/00011111111100000000/00000000000000000000/00000000000000000000/00000000000000000000/",
            "00000000000000000000/00000000000000000000/00000000000000000000/00000000000000000000/11110001100000000000/00000000100000000000/00000000100000000000/00000001100000000000/00000111100000000000/00001111100000000000/00001111100000000000/00001111000000000000/00000110000000000000/00000000000000000000/00000000000000000000/00000000000000000000/",
        ]
        let scaled = [
            "00000000000000000000000000000/00000000000011111111100000000/00000000000011111111110000000/00000000000011111111110000000/00000000000000000111100000000/00000000000000000011000000000/00000000000000000000000000000/00000111110000000000000111000/00001111110000000000000111000/00001111110000000000000111000/00001110000000000000000000000/00001110000000000000000000000/00001100000000000000000000000/00001100000001111111110000000/00001100000011111111110000000/00001100000111111111100000000/00001110001111111110000000000/00001111111111111100000000000/00000111111111111000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/",
            "00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/11111100001110000000000000000/00000000000110000000000000000/00000000000010000000000000000/00000000000010000000000000000/00000000001110000000000000000/00000000011110000000000000000/00000001111110000000000000000/00000011111110000000000000000/00000011111110000000000000000/00000011111110000000000000000/00000011111100000000000000000/00000001111000000000000000000/00000000110000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/00000000000000000000000000000/",
        ]
        XCTAssertEqual(masks.count, 2)
        for i in 0..<2 {
            XCTAssertEqual(masks[i].dense(), bits(expected[i]), "process_mask \(i)")
            let original = scaleMask(masks[i], originalWidth: 29, originalHeight: 23)
            XCTAssertEqual(original.dense(), bits(scaled[i]), "scale_masks \(i)")
            XCTAssertEqual(original.area, bits(scaled[i]).filter { $0 == 1 }.count)
        }
        // A box outside the input or NaN gives an empty mask, not a crash.
        let empty = processMasks(protos: Tensor(shape: [1, c, mh, mw], scalars: protos), coefficients: [[1, 0, 0], [1, 0, 0]],
                                 boxes: [SIMD4(30, 30, 40, 40), SIMD4(.nan, 0, .infinity, 5)], inputWidth: 20, inputHeight: 16)
        XCTAssertEqual(empty.map(\.area), [0, 0])
    }

    func testBinaryMaskTrimsToItsPixels() throws {
        let mask = try XCTUnwrap(BinaryMask(width: 5, height: 4, dense: [0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0]))
        XCTAssertEqual(mask.region, PixelRect(x: 1, y: 1, width: 2, height: 2))
        XCTAssertEqual(mask.area, 3)
        XCTAssertTrue(mask[2, 1])
        XCTAssertFalse(mask[1, 1])
        XCTAssertFalse(mask[-1, 9])
        XCTAssertEqual(BinaryMask(width: 3, height: 2, dense: [UInt8](repeating: 0, count: 6))?.region.width, 0)
        XCTAssertNil(BinaryMask(width: 3, height: 2, dense: [1, 0]), "a buffer of the wrong size")
    }

    /// Contours and merged outlines against `cv2.findContours` (opencv-python 5.0.0) and
    /// Ultralytics' `masks2segments`.
    func testContoursOnCraftedMasks() {
        func mask(_ rows: [String]) -> BinaryMask {
            BinaryMask(width: rows[0].count, height: rows.count, dense: rows.flatMap { $0.map { $0 == "#" ? 1 : 0 } })!
        }
        func points(_ c: [(x: Int, y: Int)]) -> [[Int]] { c.map { [$0.x, $0.y] } }
        // A single pixel, a square, a square with a hole holding an island (not external), and
        // a second component: contours come in reverse scan order.
        XCTAssertEqual(externalContours(mask(["...", ".#.", "..."])).map(points), [[[1, 1]]])
        XCTAssertEqual(externalContours(mask(["....", ".##.", ".##.", "...."])).map(points), [[[1, 1], [1, 2], [2, 2], [2, 1]]])
        let nested = mask([
            "#######..",
            "#.....#..",
            "#..#..#..",
            "#.....#.#",
            "#######..",
        ])
        XCTAssertEqual(externalContours(nested).map(points), [[[8, 3]], [[0, 0], [0, 4], [6, 4], [6, 0]]])
        // Diagonal steps keep every corner.
        XCTAssertEqual(externalContours(mask(["#..", ".#.", "..#"])).map(points), [[[0, 0], [2, 2]]])
        // Several segments merged at their closest points, going there and back.
        XCTAssertEqual(maskOutline(mask(["##...", "##..#"])).map { [Int($0.x), Int($0.y)] },
                       [[4, 1], [4, 1], [1, 1], [1, 0], [0, 0], [0, 1], [1, 1]])
        XCTAssertEqual(maskOutline(nested).map { [Int($0.x), Int($0.y)] },
                       [[8, 3], [8, 3], [6, 4], [6, 0], [0, 0], [0, 4], [6, 4]])
        XCTAssertEqual(maskOutline(mask(["##....###", "##......#", ".........", "...###...", "...###..."])).map { [Int($0.x), Int($0.y)] },
                       [[5, 3], [3, 3], [3, 4], [5, 4], [5, 3], [6, 0], [1, 0], [0, 0], [0, 1], [1, 1], [1, 0], [6, 0], [7, 0],
                        [8, 1], [8, 0], [6, 0]])
        XCTAssertEqual(maskOutline(mask(["#.#.#.#", ".......", "##...##"])).map { [Int($0.x), Int($0.y)] },
                       [[5, 2], [6, 2], [5, 2], [1, 2], [6, 0], [4, 0], [2, 0], [0, 0], [0, 0], [2, 0], [2, 0], [4, 0], [4, 0],
                        [6, 0], [6, 0], [1, 2], [0, 2], [1, 2]])
    }

    func testRotatedBoxCornersAndRegularization() throws {
        let image = try Image(pixels: [0, 0, 0], width: 1, height: 1, format: .rgb)
        let box = OrientedBox(xywhr: [10, 20, 8, 4, 0], conf: 0.9, cls: 0, name: "ship", in: image)
        XCTAssertEqual(box.xyxyxyxy, [SIMD2(14, 22), SIMD2(14, 18), SIMD2(6, 18), SIMD2(6, 22)])
        XCTAssertEqual(box.xyxy, [6, 18, 14, 22])
        let turned = OrientedBox(xywhr: [10, 20, 8, 4, .pi / 2], conf: 0.9, cls: 0, name: "ship", in: image)
        for (p, q) in zip(turned.xyxyxyxy, [SIMD2<Float>(8, 24), SIMD2(12, 24), SIMD2(12, 16), SIMD2(8, 16)]) {
            XCTAssertLessThan(chebyshev(p, q), 1e-5)
        }
        // regularize_rboxes: angle modulo π/2, sides swapped when the angle modulo π is ≥ π/2.
        let cases: [([Float], [Float])] = [
            ([1, 2, 8, 4, 0.3], [1, 2, 8, 4, 0.3]),
            ([1, 2, 8, 4, 2.0], [1, 2, 4, 8, 2.0 - .pi / 2]),
            ([1, 2, 8, 4, -0.5], [1, 2, 4, 8, -0.5 + .pi / 2]),
            ([1, 2, 8, 4, -1.664], [1, 2, 8, 4, -1.664 + .pi]),
        ]
        for (input, expected) in cases {
            let r = OrientedBox(xywhr: input, conf: 1, cls: 0, name: "", in: image).regularized.xywhr
            for k in 0..<5 { XCTAssertEqual(r[k], expected[k], accuracy: 1e-5, "\(input)") }
            XCTAssert((0..<Float.pi / 2).contains(r[4]))
        }
    }

    /// `batch_probiou(b, b)` from Ultralytics 8.4.190 on the same boxes.
    func testProbIoUMatchesUltralytics() {
        let boxes = [
            RotatedBox(cx: 50, cy: 50, w: 40, h: 20, angle: 0.3), RotatedBox(cx: 52, cy: 51, w: 40, h: 20, angle: 0.35),
            RotatedBox(cx: 50, cy: 50, w: 20, h: 40, angle: 0.3 + .pi / 2), RotatedBox(cx: 200, cy: 50, w: 40, h: 20, angle: 0),
            RotatedBox(cx: 60, cy: 50, w: 40, h: 20, angle: 1.2),
        ]
        let expected: [[Float]] = [
            [0.9995318055152893, 0.9248753786087036, 0.9995318055152893, 0.0, 0.47815752029418945],
            [0.9248753786087036, 0.9995318055152893, 0.9248753786087036, 0.0, 0.5184352397918701],
            [0.9995318055152893, 0.9248753786087036, 0.9995318055152893, 0.0, 0.47815752029418945],
            [0.0, 0.0, 0.0, 0.9995318055152893, 0.0],
            [0.47815752029418945, 0.5184352397918701, 0.47815752029418945, 0.0, 0.9995318055152893],
        ]
        for i in boxes.indices {
            for j in boxes.indices {
                XCTAssertEqual(probIoU(boxes[i], boxes[j]), expected[i][j], accuracy: 1e-5, "(\(i), \(j))")
            }
        }
    }

    func testFastRotatedNMSSuppressesLikeUltralytics() {
        // Sorted by score. 1 overlaps 0 (0.92) → dropped; 2 overlaps 1 (0.52) but not 0
        // (0.48): at IoU 0.5 Fast-NMS drops it even though 1 was dropped (greedy NMS would keep
        // it); 3 is far away.
        let boxes = [
            RotatedBox(cx: 50, cy: 50, w: 40, h: 20, angle: 0.3), RotatedBox(cx: 52, cy: 51, w: 40, h: 20, angle: 0.35),
            RotatedBox(cx: 60, cy: 50, w: 40, h: 20, angle: 1.2), RotatedBox(cx: 200, cy: 50, w: 40, h: 20, angle: 0),
        ]
        XCTAssertEqual(fastRotatedNMS([boxes[0], boxes[2], boxes[1], boxes[3]], iouThreshold: 0.5, limit: 300), [0, 1, 3])
        XCTAssertEqual(fastRotatedNMS(boxes, iouThreshold: 0.5, limit: 300), [0, 3])
        XCTAssertEqual(fastRotatedNMS(boxes, iouThreshold: 0.95, limit: 300), [0, 1, 2, 3])
        XCTAssertEqual(fastRotatedNMS(boxes, iouThreshold: 0.95, limit: 2), [0, 1])
        XCTAssertEqual(fastRotatedNMS([], iouThreshold: 0.5, limit: 300), [])
    }

    /// Legacy (one-to-many) heads with extra rows: the best class, NMS, the extras carried along;
    /// rotated boxes offset per class and suppressed by probabilistic IoU.
    func testLegacyNMSCarriesExtrasAndRotates() {
        // cx, cy, w, h, 2 class probabilities, 1 extra (angle); 4 anchors.
        let anchors: [[Float]] = [
            [50, 50, 40, 20, 0.9, 0.1, 0.3],
            [52, 51, 40, 20, 0.8, 0.1, 0.35],
            [52, 51, 40, 20, 0.1, 0.7, 0.35],
            [200, 50, 40, 20, 0.2, 0.6, 0.0],
        ]
        var p = Tensor(zeros: [1, 7, 4])
        for (i, a) in anchors.enumerated() { for r in 0..<7 { p.scalars[r * 4 + i] = a[r] } }
        var config = YOLOConfiguration()
        let rotated = nonMaxSuppression(p, config, classes: 2, rotated: true)
        XCTAssertEqual(rotated.map(\.score), [0.9, 0.7, 0.6])
        XCTAssertEqual(rotated.map(\.extra), [[0.3], [0.35], [0.0]])
        XCTAssertEqual(rotated[0].box, SIMD4(50, 50, 40, 20), "rotated boxes stay cx, cy, w, h")
        config.agnosticNMS = true
        XCTAssertEqual(nonMaxSuppression(p, config, classes: 2, rotated: true).map(\.score), [0.9, 0.6])
        config.agnosticNMS = false
        let plain = nonMaxSuppression(p, config, classes: 2)
        XCTAssertEqual(plain.map(\.extra), [[0.3], [0.35], [0.0]])
        XCTAssertEqual(plain[0].box, SIMD4(30, 40, 70, 60))
    }

    /// `PIL.Image.fromarray(a).resize((w, h), Image.BILINEAR)` (Pillow 13.0.0) on a pattern:
    /// reductions (antialiased), enlargements, one axis only.
    func testPILBilinearResizeIsExact() throws {
        func pattern(_ w: Int, _ h: Int) throws -> Image {
            var bytes = [UInt8]()
            for y in 0..<h { for x in 0..<w { for c in 0..<3 { bytes.append(UInt8((x * 37 + y * 91 + c * 53 + (x * y) % 7 * 29) % 256)) } } }
            return try Image(pixels: bytes, width: w, height: h, format: .rgb)
        }
        let cases: [((Int, Int, Int, Int), [UInt8])] = [
            ((7, 5, 3, 4), [61, 100, 126, 110, 148, 183, 186, 148, 91, 128, 149, 99, 126, 100, 129, 151, 151, 94, 81, 134, 149, 129, 129, 115, 135, 124, 131, 82, 93, 146, 118, 111, 138, 157, 100, 84]),
            ((13, 3, 5, 3), [39, 92, 145, 124, 177, 192, 142, 99, 94, 64, 117, 162, 149, 202, 75, 144, 138, 88, 111, 118, 124, 167, 125, 98, 148, 115, 91, 115, 151, 127, 104, 140, 116, 153, 121, 135, 112, 165, 101, 117, 124, 138, 161, 154, 130]),
            ((4, 9, 4, 2), [94, 147, 121, 83, 132, 131, 126, 88, 141, 128, 120, 126, 122, 135, 138, 131, 122, 121, 165, 124, 123, 120, 116, 111]),
            ((3, 3, 8, 7), [0, 53, 106, 2, 55, 108, 16, 69, 122, 30, 83, 136, 44, 97, 150, 58, 111, 164, 72, 125, 178, 74, 127, 180, 13, 66, 119, 15, 68, 119, 31, 84, 121, 46, 99, 123, 62, 108, 131, 77, 110, 147, 93, 112, 162, 95, 112, 165, 52, 105, 158, 55, 108, 152, 75, 128, 117, 96, 149, 83, 115, 141, 75, 136, 106, 95, 156, 72, 116, 159, 66, 119, 91, 144, 197, 95, 148, 185, 120, 173, 114, 145, 198, 43, 169, 174, 19, 194, 103, 44, 219, 32, 69, 223, 20, 73, 130, 183, 126, 128, 181, 122, 117, 170, 97, 105, 158, 71, 113, 139, 73, 143, 113, 102, 172, 88, 132, 177, 84, 137, 169, 222, 56, 161, 214, 59, 113, 166, 80, 64, 117, 100, 58, 104, 127, 91, 124, 161, 126, 144, 195, 131, 148, 201, 182, 235, 32, 172, 225, 38, 112, 165, 74, 51, 104, 109, 39, 92, 145, 74, 127, 180, 110, 163, 216, 116, 169, 222]),
            ((100, 1, 9, 1), [107, 129, 134, 115, 133, 116, 122, 136, 116, 127, 140, 123, 128, 113, 128, 139, 115, 129, 138, 122, 140, 139, 122, 139, 112, 128, 119]),
        ]
        for ((w, h, nw, nh), expected) in cases {
            XCTAssertEqual(try pattern(w, h).resampledBilinearPIL(width: nw, height: nh).pixels, expected, "\(w)×\(h) → \(nw)×\(nh)")
        }
    }

    /// Resampling only the centre crop gives the crop of the whole resized image; an extreme
    /// aspect ratio does not resample its long side.
    func testClassifyResamplesOnlyTheCrop() throws {
        var bytes = [UInt8]()
        for y in 0..<37 { for x in 0..<53 { for c in 0..<3 { bytes.append(UInt8((x * 31 + y * 17 + c * 90 + x * y) % 256)) } } }
        let image = try Image(pixels: bytes, width: 53, height: 37, format: .rgb)
        for (w, h, crop) in [(24, 17, PixelRect(x: 3, y: 0, width: 17, height: 17)), (90, 64, PixelRect(x: 13, y: 5, width: 64, height: 50))] {
            let full = image.resampledBilinearPIL(width: w, height: h)
            let part = image.resampledBilinearPIL(width: w, height: h, region: crop)
            var expected = [UInt8]()
            for y in crop.y..<(crop.y + crop.height) { expected += full.pixels[((y * w + crop.x) * 3)..<((y * w + crop.x + crop.width) * 3)] }
            XCTAssertEqual(part.pixels, expected, "\(w)×\(h) crop \(crop)")
        }
        let thin = try Image(pixels: [UInt8](repeating: 7, count: 3 * 30_000), width: 1, height: 30_000, format: .rgb)
        let input = ClassifyTransform(size: 224)(thin)
        XCTAssertEqual(input.shape, [1, 3, 224, 224])
        XCTAssertEqual(input.scalars.first, Float(7) / 255)
    }

    func testClassifyResizeGeometry() {
        let t = ClassifyTransform(size: 224)
        XCTAssert(t.resizedSize(width: 810, height: 1080) == (224, 298))
        XCTAssert(t.resizedSize(width: 1280, height: 720) == (398, 224))
        XCTAssert(t.resizedSize(width: 224, height: 224) == (224, 224))
        XCTAssert(t.resizedSize(width: 3, height: 1000) == (224, 74666))
    }
}

import Foundation
import Tensor
import TestSupport
import XCTest
import YOLOCore
import YOLONet

final class LetterboxTests: XCTestCase {
    func testInputIsExactlyWhatUltralyticsFedTheNetwork() throws {
        for (model, name, imgsz) in [("yolo26n", "bus", 640), ("yolo26n", "zidane", 640), ("yolo26n-obb", "boats", 1024)] {
            let image = try Image(contentsOf: sharedFile("images/\(name).jpg"))
            let reference = try SafeTensorsFile(contentsOf: sharedFile("reference/\(model)/\(name).safetensors"))
                .tensor("input")
            let (input, _) = Letterbox(imgsz: imgsz)(image)
            XCTAssertEqual(input.shape, reference.shape, name)
            guard input.shape == reference.shape else { continue }
            let differences = zip(input.scalars, reference.scalars).map { abs($0 - $1) * 255 }
            XCTAssertEqual(differences.max(), 0, "\(name): max |Δ|·255")
            XCTAssertEqual(differences.filter { $0 > 0 }.count, 0, "\(name): differing values")
        }
    }

    func testGeometryMatchesUltralytics() {
        // (width, height), imgsz, auto → resized size, input size, left, top; from
        // ultralytics.data.augment.LetterBox 8.4.190 (stride 32).
        let cases: [((Int, Int), Int, Bool, (Int, Int, Int, Int, Int, Int))] = [
            ((810, 1080), 640, true, (480, 640, 480, 640, 0, 0)),
            ((1280, 720), 640, true, (640, 360, 640, 384, 0, 12)),
            ((1920, 1080), 1024, true, (1024, 576, 1024, 576, 0, 0)),
            ((810, 1080), 640, false, (480, 640, 640, 640, 80, 0)),
            ((3000, 1), 640, true, (640, 1, 640, 32, 0, 15)),
            ((1, 3000), 640, true, (1, 640, 32, 640, 15, 0)),
            ((641, 479), 640, true, (640, 478, 640, 480, 0, 1)),
            ((37, 100), 640, true, (237, 640, 256, 640, 9, 0)),
            ((500, 375), 320, false, (320, 240, 320, 320, 0, 40)),
            ((47, 33), 640, true, (640, 449, 640, 480, 0, 15)),
            ((5, 2), 640, false, (640, 256, 640, 640, 0, 192)),
        ]
        for ((width, height), imgsz, auto, e) in cases {
            let t = Letterbox(imgsz: imgsz, auto: auto).transform(width: width, height: height)
            let actual = (t.resizedWidth, t.resizedHeight, t.inputWidth, t.inputHeight, t.left, t.top)
            XCTAssert(actual == e, "\(width)×\(height) at \(imgsz), auto \(auto): \(actual), expected \(e)")
        }
    }

    func testPaddingIs114AndPlanesAreRGB() throws {
        let image = try Image(pixels: [255, 0, 10, 0, 255, 20], width: 2, height: 1, format: .rgb)
        let (input, t) = Letterbox(imgsz: 64, stride: 32, auto: false)(image)
        XCTAssertEqual(input.shape, [1, 3, 64, 64])
        XCTAssertEqual(t.top, 16)
        XCTAssertEqual(input[0, 0, 0, 0], Float(114) / 255)
        XCTAssertEqual(input[0, 0, 63, 63], Float(114) / 255)
        XCTAssertEqual(input[0, 0, 16, 0], 1)  // red of the left pixel
        XCTAssertEqual(input[0, 1, 16, 0], 0)
        XCTAssertEqual(input[0, 2, 16, 0], Float(10) / 255)
        XCTAssertEqual(input[0, 1, 47, 63], 1)  // green of the right pixel
    }

    func testResizeMatchesOpenCV() throws {
        // cv2.resize(pattern, (w, h), interpolation=cv2.INTER_LINEAR), opencv-python 5.0.0.93:
        // down, up, an exact halving (INTER_AREA inside OpenCV), a single pixel, mixed.
        let cases: [((Int, Int), (Int, Int), String)] = [
            ((7, 13), (5, 3), "a1b4617f70717f5e946ea393b25e7132679ca0d5710f44797eb381ec5456b180b59f5d929f295e6ba05e497e90"),
            ((5, 3), (11, 7), "00356a073c71174c82285d92396ea34a7fb45b90c56ba0d67cb1e68dc2f794c9fe0d427714497e255a8f366b9d477d9e598e9e6a8eb07b8fc17f9dd280aee380b5ea34699e3b70a54e83b86196bd73a88d86bb5e988b70ab5b838961965973a8467bb05b90c56398cd77ace18bc0de9fd47db3e81dc78831db274592245932386d0b407582b77e8aac87a08f9cab7ca48f927772a74a877a5f9d4d757d558a506a9f3e73a8a9de37b2bf41c97257cb396b7e5071316677486d8e5f73a46886bb6e9dd271a6dbb6eb20bfc629d66840d62258793a6f1c518633689d4a7fb46197cb78aee382b7ec"),
            ((6, 4), (3, 2), "4277ac93887d64998e7f74696ca196998e83"),
            ((1, 1), (4, 3), "00356a00356a00356a00356a00356a00356a00356a00356a00356a00356a00356a00356a"),
            ((13, 7), (4, 9), "295f93a2d7ac1a4f8492c71c6ba0c0487d927aaf7a578c76aa7c9f52869179ae8a84557cb43a6f9bac975b6c8ccd53705287bcaf4479cb603588bdf29fbb4291a28d7486a55b77ac5e855697737d5388889a4467396e98955f745c9151b858787bb0c57cb0857cb1467db2e7"),
        ]
        for ((sw, sh), (dw, dh), hex) in cases {
            let image = try Image(pixels: ImageFixtures.pattern(width: sw, height: sh), width: sw, height: sh, format: .rgb)
            XCTAssertEqual(image.resized(width: dw, height: dh).pixels, ImageFixtures.bytes(hex: hex), "\(sw)×\(sh) → \(dw)×\(dh)")
        }
    }

    func testResizeMatchesAPlainRestatementOfOpenCV() throws {
        var generator = SeededGenerator(seed: 26)
        for _ in 0..<60 {
            let sw = Int.random(in: 1...40, using: &generator), sh = Int.random(in: 1...40, using: &generator)
            let dw = Int.random(in: 1...40, using: &generator), dh = Int.random(in: 1...40, using: &generator)
            let pixels = (0..<sw * sh * 3).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let image = try Image(pixels: pixels, width: sw, height: sh, format: .rgb)
            XCTAssertEqual(image.resized(width: dw, height: dh).pixels, plainResize(pixels, sw, sh, dw, dh), "\(sw)×\(sh) → \(dw)×\(dh)")
        }
    }

    /// OpenCV's `resize` INTER_LINEAR on 8-bit data, one output value at a time.
    private func plainResize(_ src: [UInt8], _ sw: Int, _ sh: Int, _ dw: Int, _ dh: Int) -> [UInt8] {
        if sw == 2 * dw && sh == 2 * dh {
            return (0..<dw * dh * 3).map { i in
                let c = i % 3, x = i / 3 % dw, y = i / 3 / dw
                let at = { (x: Int, y: Int) in Int(src[(y * sw + x) * 3 + c]) }
                return UInt8((at(2 * x, 2 * y) + at(2 * x + 1, 2 * y) + at(2 * x, 2 * y + 1) + at(2 * x + 1, 2 * y + 1) + 2) >> 2)
            }
        }
        func tap(_ i: Int, _ s: Int, _ d: Int) -> (Int, Float) {
            let f = Float((Double(i) + 0.5) * (1 / (Double(d) / Double(s))) - 0.5)
            let p = Int(f.rounded(.down))
            return (p, f - Float(p))
        }
        func fixed(_ v: Float) -> Int { Int((v * 2048).rounded(.toNearestOrEven)) }
        var out: [UInt8] = []
        for y in 0..<dh {
            let (sy, fy) = tap(y, sh, dh)
            for x in 0..<dw {
                var (sx, fx) = tap(x, sw, dw)
                if sx < 0 { (sx, fx) = (0, 0) }
                if sx >= sw - 1 { (sx, fx) = (sw - 1, 0) }
                for c in 0..<3 {
                    func row(_ r: Int) -> Int {
                        let r = min(max(r, 0), sh - 1)
                        return Int(src[(r * sw + sx) * 3 + c]) * fixed(1 - fx) + Int(src[(r * sw + min(sx + 1, sw - 1)) * 3 + c]) * fixed(fx)
                    }
                    let v = (fixed(1 - fy) * (row(sy) >> 4)) >> 16 + (fixed(fy) * (row(sy + 1) >> 4)) >> 16
                    out.append(UInt8((v + 2) >> 2))
                }
            }
        }
        return out
    }

    func testBoxesMapBackExactlyAsUltralyticsScalesThem() throws {
        struct Results: Decodable {
            struct Boxes: Decodable { let xyxy: [[Float]] }
            struct OBB: Decodable { let xywhr: [[Float]] }
            struct Keypoints: Decodable { let xy: [[[Float]]] }
            let orig_shape: [Int]
            let input_shape: [Int]
            let boxes: Boxes?
            let obb: OBB?
            let keypoints: Keypoints?
        }
        func load(_ model: String, _ name: String) throws -> (Results, [Float], Int, LetterboxTransform) {
            let results = try JSONDecoder().decode(Results.self, from: Data(contentsOf: sharedFile("reference/\(model)/\(name).json")))
            let output = try SafeTensorsFile(contentsOf: sharedFile("reference/\(model)/\(name).safetensors")).tensor("output.0")
            let imgsz = max(results.input_shape[2], results.input_shape[3])
            let t = Letterbox(imgsz: imgsz).transform(width: results.orig_shape[1], height: results.orig_shape[0])
            XCTAssertEqual([t.inputHeight, t.inputWidth], Array(results.input_shape[2...]))
            return (results, output.scalars, output.shape[2], t)
        }

        for name in ["bus", "zidane"] {
            let (results, rows, stride, t) = try load("yolo26n", name)
            let expected = try XCTUnwrap(results.boxes).xyxy
            XCTAssertFalse(expected.isEmpty)
            for (i, box) in expected.enumerated() {
                let raw = SIMD4(rows[i * stride], rows[i * stride + 1], rows[i * stride + 2], rows[i * stride + 3])
                XCTAssertEqual(t.scaleBox(raw), SIMD4(box[0], box[1], box[2], box[3]), "\(name) box \(i)")
            }
        }

        let (obb, obbRows, obbStride, obbTransform) = try load("yolo26n-obb", "boats")
        for (i, box) in try XCTUnwrap(obb.obb).xywhr.enumerated() {
            let raw = SIMD4(obbRows[i * obbStride], obbRows[i * obbStride + 1], obbRows[i * obbStride + 2], obbRows[i * obbStride + 3])
            XCTAssertEqual(obbTransform.scaleBox(xywh: raw), SIMD4(box[0], box[1], box[2], box[3]), "boats box \(i)")
        }

        let (pose, poseRows, poseStride, poseTransform) = try load("yolo26n-pose", "bus")
        for (i, person) in try XCTUnwrap(pose.keypoints).xy.enumerated() {
            for (k, point) in person.enumerated() {
                let raw = SIMD2(poseRows[i * poseStride + 6 + 3 * k], poseRows[i * poseStride + 7 + 3 * k])
                XCTAssertEqual(poseTransform.scalePoint(raw), SIMD2(point[0], point[1]), "bus person \(i) keypoint \(k)")
            }
        }
    }
}

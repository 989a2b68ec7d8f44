import Foundation
import TestSupport
import XCTest
import YOLOCore

/// Test data shared by the image and letterbox tests.
enum ImageFixtures {
    /// A deterministic RGB test pattern, `width × height × 3` bytes.
    static func pattern(width: Int, height: Int) -> [UInt8] {
        var out: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                for c in 0..<3 { out.append(UInt8((x * 37 + y * 91 + c * 53 + x * y * 7) % 256)) }
            }
        }
        return out
    }

    static func bytes(hex: String) -> [UInt8] {
        var out: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let j = hex.index(i, offsetBy: 2)
            out.append(UInt8(hex[i..<j], radix: 16)!)
            i = j
        }
        return out
    }

    static func temporaryDirectory() throws -> URL {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-image-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return url
    }
}

/// PNG files written by hand, with zlib "stored" (uncompressed) blocks, so that any bit depth,
/// colour type and chunk layout can be made without an encoder.
enum PNGBuilder {
    /// `rows`: each scanline's bytes without the filter byte (16-bit samples big-endian).
    static func make(width: Int, height: Int, bitDepth: UInt8, colorType: UInt8, rows: [[UInt8]],
                     before: [(String, [UInt8])] = [], after: [(String, [UInt8])] = []) -> [UInt8] {
        let header = be32(width) + be32(height) + [bitDepth, colorType, 0, 0, 0]
        var out: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A] + chunk("IHDR", header)
        for (type, data) in before { out += chunk(type, data) }
        out += chunk("IDAT", zlibStored(rows.flatMap { [0] + $0 }))
        for (type, data) in after { out += chunk(type, data) }
        return out + chunk("IEND", [])
    }

    static func chunk(_ type: String, _ data: [UInt8]) -> [UInt8] {
        let body = Array(type.utf8) + data
        return be32(data.count) + body + be32(Int(crc32(body)))
    }

    static func be32(_ v: Int) -> [UInt8] { [UInt8(v >> 24 & 255), UInt8(v >> 16 & 255), UInt8(v >> 8 & 255), UInt8(v & 255)] }

    static func crc32(_ bytes: [UInt8]) -> UInt32 {
        var crc: UInt32 = 0xFFFF_FFFF
        for b in bytes {
            crc ^= UInt32(b)
            for _ in 0..<8 { crc = crc & 1 != 0 ? 0xEDB8_8320 ^ crc >> 1 : crc >> 1 }
        }
        return ~crc
    }

    static func zlibStored(_ data: [UInt8]) -> [UInt8] {
        var out: [UInt8] = [0x78, 0x01]
        var start = 0
        repeat {
            let end = min(start + 65535, data.count), n = end - start
            out += [end == data.count ? 1 : 0, UInt8(n & 255), UInt8(n >> 8), UInt8(~n & 255), UInt8(~n >> 8 & 255)]
            out += data[start..<end]
            start = end
        } while start < data.count
        var a: UInt32 = 1, b: UInt32 = 0
        for x in data { a = (a + UInt32(x)) % 65521; b = (b + a) % 65521 }
        return out + be32(Int(b << 16 | a))
    }

    /// A TIFF header whose first IFD holds only Orientation = `orientation`.
    static func tiff(orientation: Int, littleEndian: Bool) -> [UInt8] {
        func u16(_ v: Int) -> [UInt8] { littleEndian ? [UInt8(v & 255), UInt8(v >> 8)] : [UInt8(v >> 8), UInt8(v & 255)] }
        func u32(_ v: Int) -> [UInt8] { littleEndian ? u16(v & 0xFFFF) + u16(v >> 16) : u16(v >> 16) + u16(v & 0xFFFF) }
        return (littleEndian ? [0x49, 0x49] : [0x4D, 0x4D]) + u16(42) + u32(8)
            + u16(1) + u16(0x0112) + u16(3) + u32(1) + u16(orientation) + u16(0) + u32(0)
    }
}

final class ImageTests: XCTestCase {
    /// FNV-1a 64 of the RGB bytes, the digest the expected values below were computed with.
    private func fnv1a(_ bytes: [UInt8]) -> UInt64 {
        bytes.reduce(0xCBF2_9CE4_8422_2325) { ($0 ^ UInt64($1)) &* 0x100_0000_01B3 }
    }

    func testSharedJPEGsDecodeToTheSamePixelsAsOpenCV() throws {
        // Digests of cv2.imread(path)[..., ::-1] (opencv-python 5.0.0.93, libjpeg-turbo 3.1.2).
        let expected: [(String, Int, Int, UInt64)] = [
            ("bus.jpg", 810, 1080, 0x06A1_E636_02D5_A5AA),
            ("zidane.jpg", 1280, 720, 0x6F84_42D9_936F_E550),
            ("boats.jpg", 1920, 1080, 0xDD9F_EC4B_86E0_51AC),
        ]
        for (name, width, height, digest) in expected {
            let image = try Image(contentsOf: sharedFile("images/" + name))
            XCTAssertEqual(image.width, width, name)
            XCTAssertEqual(image.height, height, name)
            XCTAssertEqual(fnv1a(image.pixels), digest, "\(name) differs from cv2.imread")
        }
    }

    func testGrayAndCMYKJPEGsDecodeLikeOpenCV() throws {
        // 8×8 JPEGs written by Pillow; expected pixels from cv2.imdecode(..., IMREAD_COLOR), RGB.
        let gray = "/9j/4AAQSkZJRgABAQAAAQABAAD/2wBDAAgGBgcGBQgHBwcJCQgKDBQNDAsLDBkSEw8UHRofHh0aHBwgJC4nICIsIxwcKDcpLDAxNDQ0Hyc5PTgyPC4zNDL/wAALCAAIAAgBAREA/8QAHwAAAQUBAQEBAQEAAAAAAAAAAAECAwQFBgcICQoL/8QAtRAAAgEDAwIEAwUFBAQAAAF9AQIDAAQRBRIhMUEGE1FhByJxFDKBkaEII0KxwRVS0fAkM2JyggkKFhcYGRolJicoKSo0NTY3ODk6Q0RFRkdISUpTVFVWV1hZWmNkZWZnaGlqc3R1dnd4eXqDhIWGh4iJipKTlJWWl5iZmqKjpKWmp6ipqrKztLW2t7i5usLDxMXGx8jJytLT1NXW19jZ2uHi4+Tl5ufo6erx8vP09fb3+Pn6/9oACAEBAAA/AG2Nrbvam0hh8hjEYvJijMMZDxPxszltwRXAkLvhziEg1//Z"
        let grayPixels = "0303032121214f4f4f686868989898b8b8b8dddddd0b0b0b5353538f8f8fb3b3b3dddddd0f0f0f2a2a2a6d6d6d848484b0b0b0ececec2222225353537e7e7ec2c2c2e2e2e22626261f1f1f555555747474c2c2c2fcfcfc1d1d1d6b6b6ba3a3a3606060a4a4a4f3f3f3343434737373b6b6b6ffffff2e2e2ecfcfcf0e0e0e5252528e8e8effffff2929295a5a5ac8c8c81a1a1a6b6b6bcecece202020535353aeaeaeffffff4f4f4f7d7d7de2e2e2171717797979dedede2929298e8e8ed1d1d1"
        let cmyk = "/9j/7gAOQWRvYmUAZAAAAAAA/9sAQwAIBgYHBgUIBwcHCQkICgwUDQwLCwwZEhMPFB0aHx4dGhwcICQuJyAiLCMcHCg3KSwwMTQ0NB8nOT04MjwuMzQy/8AAFAgACAAIBEMRAE0RAFkRAEsRAP/EAB8AAAEFAQEBAQEBAAAAAAAAAAABAgMEBQYHCAkKC//EALUQAAIBAwMCBAMFBQQEAAABfQECAwAEEQUSITFBBhNRYQcicRQygZGhCCNCscEVUtHwJDNicoIJChYXGBkaJSYnKCkqNDU2Nzg5OkNERUZHSElKU1RVVldYWVpjZGVmZ2hpanN0dXZ3eHl6g4SFhoeIiYqSk5SVlpeYmZqio6Slpqeoqaqys7S1tre4ubrCw8TFxsfIycrS09TV1tfY2drh4uPk5ebn6Onq8fLz9PX29/j5+v/aAA4EQwBNAFkASwAAPwBb66uEuhdzTeeolEvnSyCaQFJU534wu0uyExhEygzMCKjiW8dkuFt5zdLt25UtMXkicDEuQW3AJjY8SFiwTzORUUcVoSZkljAlQRn7O7xyGOSRCAJM+awY79hLEsFBEJABpb61uHuhaTQ+QplEXkyxiGQl5U42Zw24ozkRl0y4zCSa/9k="
        let cmykPixels = "8163491a140da174525031100e07013d17bf1062542d261c9b6738422a0b0f05291fcda0a2886d442f1f000000561f010f052b13cd9e9779644d391b000000340cb31490792f271c8c72563d2c180704013205a5037c59412e1f0000004c22c68c551f3e189b087b623123170202014214ca0175544c3924100143120e0a976c2e4d13ac017d533424191309083011ad9b7b4f4226110f03411e1b12a35c364523c3017d57563520814a101bd2b2a1754650240d0e64523c2c1b100a032df3be"
        for (file, pixels) in [(gray, grayPixels), (cmyk, cmykPixels)] {
            let image = try Image(data: XCTUnwrap(Data(base64Encoded: file)))
            XCTAssertEqual(image.width, 8)
            XCTAssertEqual(image.height, 8)
            XCTAssertEqual(image.pixels, ImageFixtures.bytes(hex: pixels))
        }
    }

    func testPixelFormats() throws {
        let rgb: [UInt8] = [1, 2, 3, 4, 5, 6]
        XCTAssertEqual(try Image(pixels: rgb, width: 2, height: 1, format: .rgb).pixels, rgb)
        XCTAssertEqual(try Image(pixels: [3, 2, 1, 6, 5, 4], width: 1, height: 2, format: .bgr).pixels, rgb)
        XCTAssertEqual(try Image(pixels: [1, 2, 3, 0, 4, 5, 6, 255], width: 2, height: 1, format: .rgba).pixels, rgb)
        XCTAssertEqual(try Image(pixels: [3, 2, 1, 9, 6, 5, 4, 0], width: 2, height: 1, format: .bgra).pixels, rgb)
        XCTAssertEqual(try Image(pixels: [7, 200], width: 2, height: 1, format: .gray).pixels, [7, 7, 7, 200, 200, 200])
        XCTAssertThrowsError(try Image(pixels: rgb, width: 2, height: 1, format: .rgba)) { error in
            guard case ImageError.invalidPixels = error else { return XCTFail("\(error)") }
        }
        XCTAssertThrowsError(try Image(pixels: [], width: 0, height: 1, format: .rgb)) { error in
            guard case ImageError.invalidPixels = error else { return XCTFail("\(error)") }
        }
        // A size whose pixel count overflows is a mismatch, not a crash.
        XCTAssertThrowsError(try Image(pixels: [1, 2, 3], width: Int.max, height: 3, format: .rgb)) { error in
            guard case ImageError.invalidPixels = error else { return XCTFail("\(error)") }
        }
    }

    func testPNGRoundTripIsExactAndJPEGRoundTripIsClose() throws {
        let directory = try ImageFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = try Image(pixels: ImageFixtures.pattern(width: 37, height: 23), width: 37, height: 23, format: .rgb)
        for name in ["a.png", "b.PNG"] {
            let url = directory.appendingPathComponent(name)
            try image.write(to: url)
            XCTAssertEqual(try Image(contentsOf: url), image, name)
        }
        XCTAssertEqual(try Image(data: image.pngData()), image)

        // A smooth image through JPEG quality 90 comes back within a few levels.
        var smooth: [UInt8] = []
        for y in 0..<48 { for x in 0..<64 { smooth += [UInt8(x * 4), UInt8(y * 5), UInt8((x + y) * 2)] } }
        let gradient = try Image(pixels: smooth, width: 64, height: 48, format: .rgb)
        for name in ["c.jpg", "d.jpeg"] {
            let url = directory.appendingPathComponent(name)
            try gradient.write(to: url)
            let decoded = try Image(contentsOf: url)
            XCTAssertEqual(decoded.width, 64)
            XCTAssertEqual(decoded.height, 48)
            let worst = zip(decoded.pixels, gradient.pixels).map { abs(Int($0) - Int($1)) }.max()!
            XCTAssertLessThanOrEqual(worst, 6, name)
            XCTAssertEqual(try Image(data: Data(contentsOf: url)), decoded)
        }
    }

    func testFormatComesFromTheBytesNotTheExtension() throws {
        let directory = try ImageFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = try Image(pixels: ImageFixtures.pattern(width: 5, height: 4), width: 5, height: 4, format: .rgb)
        let url = directory.appendingPathComponent("really-a-png.jpg")
        try image.pngData().write(to: url)
        XCTAssertEqual(try Image(contentsOf: url), image)
    }

    func testApplyingOrientation() throws {
        // 3×2 gray image 1 2 3 / 4 5 6 and what each EXIF orientation shows upright.
        let image = try Image(pixels: [1, 2, 3, 4, 5, 6], width: 3, height: 2, format: .gray)
        let expected: [Int: (Int, Int, [UInt8])] = [
            1: (3, 2, [1, 2, 3, 4, 5, 6]),
            2: (3, 2, [3, 2, 1, 6, 5, 4]),
            3: (3, 2, [6, 5, 4, 3, 2, 1]),
            4: (3, 2, [4, 5, 6, 1, 2, 3]),
            5: (2, 3, [1, 4, 2, 5, 3, 6]),
            6: (2, 3, [4, 1, 5, 2, 6, 3]),
            7: (2, 3, [6, 3, 5, 2, 4, 1]),
            8: (2, 3, [3, 6, 2, 5, 1, 4]),
            0: (3, 2, [1, 2, 3, 4, 5, 6]),
            9: (3, 2, [1, 2, 3, 4, 5, 6]),
        ]
        for (orientation, (width, height, gray)) in expected {
            let turned = image.applyingOrientation(orientation)
            XCTAssertEqual(turned.width, width, "orientation \(orientation)")
            XCTAssertEqual(turned.height, height, "orientation \(orientation)")
            XCTAssertEqual(turned.pixels, gray.flatMap { [$0, $0, $0] }, "orientation \(orientation)")
        }
    }

    func testJPEGExifOrientationIsApplied() throws {
        let image = try Image(pixels: ImageFixtures.pattern(width: 16, height: 8), width: 16, height: 8, format: .rgb)
        let jpeg = [UInt8](try image.jpegData(quality: 95))
        let plain = try Image(data: Data(jpeg))
        for orientation in 1...8 {
            for littleEndian in [false, true] {
                // An APP1 Exif segment right after SOI.
                let payload = Array("Exif\0\0".utf8) + PNGBuilder.tiff(orientation: orientation, littleEndian: littleEndian)
                let app1: [UInt8] = [0xFF, 0xE1, UInt8((payload.count + 2) >> 8), UInt8((payload.count + 2) & 255)] + payload
                let decoded = try Image(data: Data(jpeg[..<2] + app1 + jpeg[2...]))
                XCTAssertEqual(decoded, plain.applyingOrientation(orientation), "orientation \(orientation)")
                XCTAssertEqual(decoded.width, orientation >= 5 ? 8 : 16)
            }
        }
    }

    func testPNGVariantsDecodeLikeOpenCV() throws {
        let width = 3, height = 2
        let rgb = ImageFixtures.pattern(width: width, height: height)
        func rows(_ sample: (Int, Int) -> [UInt8]) -> [[UInt8]] {
            (0..<height).map { y in (0..<width).flatMap { x in sample(x, y) } }
        }
        func decode(_ png: [UInt8]) throws -> Image { try Image(data: Data(png)) }
        let expected = try Image(pixels: rgb, width: width, height: height, format: .rgb)
        let rgbRows = rows { x, y in Array(rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3]) }

        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 2, rows: rgbRows)), expected)

        // Alpha is dropped, not composited: fully transparent pixels keep their colour.
        let rgbaRows = rows { x, y in Array(rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3]) + [UInt8(x * 100)] }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 6, rows: rgbaRows)), expected)

        // 16-bit samples keep their high byte (OpenCV: >> 8, not a rounded / 257).
        let rgb16Rows = rows { x, y in rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3].flatMap { [$0, 0xFF] } }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 16, colorType: 2, rows: rgb16Rows)), expected)
        let rgba16Opaque = rows { x, y in rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3].flatMap { [$0, 0xC7] } + [0xFF, 0xFF] }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 16, colorType: 6, rows: rgba16Opaque)), expected)
        // libpng premultiplies 16-bit alpha; undoing it is within one level for alpha ≥ 1/256.
        let rgba16 = rows { x, y in rgb[(y * width + x) * 3..<(y * width + x) * 3 + 3].flatMap { [$0, 0x80] } + [UInt8(1 + x * 90), 0x00] }
        let translucent = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 16, colorType: 6, rows: rgba16))
        XCTAssertLessThanOrEqual(zip(translucent.pixels, rgb).map { abs(Int($0) - Int($1)) }.max()!, 1)

        // Gray, gray + alpha and 16-bit gray are replicated to the three channels.
        let gray = rgb.enumerated().filter { $0.offset % 3 == 0 }.map(\.element)
        let grayImage = try Image(pixels: gray, width: width, height: height, format: .gray)
        let grayRows = rows { x, y in [gray[y * width + x]] }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 0, rows: grayRows)), grayImage)
        let grayAlphaRows = rows { x, y in [gray[y * width + x], 0] }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 4, rows: grayAlphaRows)), grayImage)
        let gray16Rows = rows { x, y in [gray[y * width + x], 0x9A] }
        XCTAssertEqual(try decode(PNGBuilder.make(width: width, height: height, bitDepth: 16, colorType: 0, rows: gray16Rows)), grayImage)

        // 1-bit gray expands to 0 / 255.
        let bits = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 1, colorType: 0, rows: [[0b1010_0000], [0b0110_0000]]))
        XCTAssertEqual(bits.pixels, [UInt8]([255, 0, 255, 0, 255, 255]).flatMap { [$0, $0, $0] })

        // A palette with transparency gives the palette colours.
        let palette: [UInt8] = [10, 20, 30, 40, 50, 60, 70, 80, 90]
        let indexed = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 3, rows: [[0, 1, 2], [2, 1, 0]],
                                                 before: [("PLTE", palette), ("tRNS", [0, 128])]))
        XCTAssertEqual(indexed.pixels, [0, 1, 2, 2, 1, 0].flatMap { palette[$0 * 3..<$0 * 3 + 3] })

        // Gamma and colour-profile chunks change no sample (OpenCV ignores them).
        let gamma = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 2, rows: rgbRows,
                                               before: [("gAMA", PNGBuilder.be32(100_000)), ("cHRM", [UInt8](repeating: 1, count: 32))]))
        XCTAssertEqual(gamma, expected)
        let gamma16 = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 16, colorType: 2, rows: rgb16Rows,
                                                 before: [("sRGB", [0])]))
        XCTAssertEqual(gamma16, expected)

        // eXIf orientation applies wherever the chunk is, as in OpenCV.
        for exif in [PNGBuilder.tiff(orientation: 6, littleEndian: false), PNGBuilder.tiff(orientation: 6, littleEndian: true)] {
            let before = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 2, rows: rgbRows, before: [("eXIf", exif)]))
            let after = try decode(PNGBuilder.make(width: width, height: height, bitDepth: 8, colorType: 2, rows: rgbRows, after: [("eXIf", exif)]))
            XCTAssertEqual(before, expected.applyingOrientation(6))
            XCTAssertEqual(after, expected.applyingOrientation(6))
        }
    }

    func testUnreadableFilesThrowTypedErrors() throws {
        let directory = try ImageFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        func error(writing bytes: [UInt8], as name: String) -> ImageError? {
            let url = directory.appendingPathComponent(name)
            try? Data(bytes).write(to: url)
            do {
                _ = try Image(contentsOf: url)
                return nil
            } catch {
                XCTAssert((error as? ImageError)?.errorDescription?.contains(name) == true, "\(error)")
                return error as? ImageError
            }
        }
        func isCorrupt(_ error: ImageError?) -> Bool {
            if case .corrupt = error { return true }
            return false
        }
        let image = try Image(pixels: ImageFixtures.pattern(width: 32, height: 24), width: 32, height: 24, format: .rgb)
        let jpeg = [UInt8](try image.jpegData())
        let png = [UInt8](try image.pngData())

        XCTAssertEqual(error(writing: [], as: "empty.jpg"), .empty(file: directory.appendingPathComponent("empty.jpg").path))
        XCTAssertEqual(error(writing: Array("hello, world".utf8), as: "text.png"),
                       .unsupportedFormat(file: directory.appendingPathComponent("text.png").path))
        XCTAssertEqual(error(writing: Array(jpeg.prefix(jpeg.count * 2 / 3)), as: "truncated.jpg"),
                       .truncated(file: directory.appendingPathComponent("truncated.jpg").path))
        XCTAssert(isCorrupt(error(writing: Array(jpeg.prefix(40)), as: "header-only.jpg")))
        XCTAssert(isCorrupt(error(writing: [0xFF, 0xD8, 0xFF] + [UInt8](repeating: 0x55, count: 500), as: "garbage.jpg")))
        XCTAssert(isCorrupt(error(writing: Array(png.prefix(png.count - 20)), as: "truncated.png")))

        // A wrong CRC on the image data.
        var badCRC = png
        let idat = (0..<png.count - 4).first { png[$0..<$0 + 4].elementsEqual("IDAT".utf8) }!
        let length = Int(png[idat - 4]) << 24 | Int(png[idat - 3]) << 16 | Int(png[idat - 2]) << 8 | Int(png[idat - 1])
        badCRC[idat + 4 + length] ^= 0xFF
        XCTAssert(isCorrupt(error(writing: badCRC, as: "bad-crc.png")))

        // Missing files and directories.
        let missing = directory.appendingPathComponent("missing.jpg")
        XCTAssertThrowsError(try Image(contentsOf: missing)) { error in
            guard case .unreadable(let file, _) = error as? ImageError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, missing.path)
        }
        XCTAssertThrowsError(try Image(contentsOf: directory)) { error in
            guard case .unreadable = error as? ImageError else { return XCTFail("\(error)") }
        }
        // A FIFO nobody writes would block the read forever, /dev/zero would never end: both are
        // refused by their kind before they are opened.
        let fifo = directory.appendingPathComponent("fifo.jpg")
        XCTAssertEqual(mkfifo(fifo.path, 0o644), 0)
        for (file, kind) in [(fifo, "a FIFO"), (URL(fileURLWithPath: "/dev/zero"), "a character device")] {
            XCTAssertThrowsError(try Image(contentsOf: file)) { error in
                XCTAssertEqual(error as? ImageError, .unreadable(file: file.path, reason: "it is \(kind), not an image file"))
            }
        }
        XCTAssertThrowsError(try Image(data: Data())) { error in
            XCTAssertEqual(error as? ImageError, .empty(file: "<data>"))
        }
    }

    /// Growth of the peak resident memory (VmHWM) while `body` runs, in MB.
    private func peakMemoryGrowth(_ body: () throws -> Void) throws -> Int {
        func kilobytes(_ field: String) throws -> Int {
            let status = try String(contentsOfFile: "/proc/self/status", encoding: .utf8)
            let line = try XCTUnwrap(status.split(separator: "\n").first { $0.hasPrefix(field + ":") })
            return try XCTUnwrap(Int(line.split(whereSeparator: { $0 == " " || $0 == "\t" })[1]))
        }
        // Writing 5 to clear_refs resets VmHWM to the current resident size.
        try "5".write(toFile: "/proc/self/clear_refs", atomically: false, encoding: .utf8)
        let before = try kilobytes("VmHWM")
        try body()
        return (try kilobytes("VmHWM") - before) / 1024
    }

    func testDecompressionBombsFailBeforeTheirPixelsAreInMemory() throws {
        // Tiny files claiming side × side RGB pixels: a PNG with no image data, and a 16×16
        // JPEG whose frame header says side × side.
        func png(claiming side: Int) -> Data {
            Data(PNGBuilder.make(width: side, height: side, bitDepth: 8, colorType: 2, rows: []))
        }
        let small = [UInt8](try Image(pixels: ImageFixtures.pattern(width: 16, height: 16), width: 16, height: 16, format: .rgb).jpegData())
        let sof = (2..<small.count - 1).first { small[$0] == 0xFF && small[$0 + 1] == 0xC0 }!
        func jpeg(claiming side: Int) -> Data {
            var bytes = small
            bytes[(sof + 5)..<(sof + 9)] = [UInt8(side >> 8), UInt8(side & 255), UInt8(side >> 8), UInt8(side & 255)]
            return Data(bytes)
        }
        XCTAssertLessThan(png(claiming: 16384).count, 100)
        XCTAssertLessThan(jpeg(claiming: 16384).count, 2000)

        // Over the budget: refused from the header, naming the file, the size and the budget.
        let directory = try ImageFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        for (name, data) in [("bomb.png", png(claiming: 16384)), ("bomb.jpg", jpeg(claiming: 16384))] {
            let url = directory.appendingPathComponent(name)
            try data.write(to: url)
            let growth = try peakMemoryGrowth {
                XCTAssertThrowsError(try Image(contentsOf: url)) { error in
                    XCTAssertEqual(error as? ImageError,
                                   .tooLarge(file: url.path, width: 16384, height: 16384, maxPixels: Image.defaultMaxPixels))
                    let message = (error as? ImageError)?.errorDescription ?? ""
                    for part in [url.path, "16384×16384", "\(Image.defaultMaxPixels)", "maxPixels", "maxImagePixels"] {
                        XCTAssert(message.contains(part), "\(message) lacks \(part)")
                    }
                }
            }
            XCTAssertLessThan(growth, 32, "\(name): peak memory grew by \(growth) MB")
        }

        // Within the budget (8000² RGB is 192 MB, 16384² is 805 MB): decoded row by row, the
        // files fail where their data ends, before the whole image is in memory.
        let cases: [(String, Data, Int)] = [
            ("8000² PNG", png(claiming: 8000), Image.defaultMaxPixels),
            ("16384² PNG", png(claiming: 16384), 1 << 28),
            ("8000² JPEG", jpeg(claiming: 8000), Image.defaultMaxPixels),
            ("16384² JPEG", jpeg(claiming: 16384), 1 << 28),
        ]
        for (name, data, maxPixels) in cases {
            let growth = try peakMemoryGrowth {
                XCTAssertThrowsError(try Image(data: data, maxPixels: maxPixels)) { error in
                    switch error as? ImageError {
                    case .corrupt where name.hasSuffix("PNG"), .truncated where name.hasSuffix("JPEG"): break
                    default: XCTFail("\(name): \(error)")
                    }
                }
            }
            XCTAssertLessThan(growth, 32, "\(name): peak memory grew by \(growth) MB")
        }
    }

    func testEndMarkersAreRequiredAsOpenCVRequiresThem() throws {
        // A JPEG missing only its EOI marker decodes whole (libjpeg merely warns, as in
        // cv2.imread); one cut within its scan data is truncated.
        let bus = try Data(contentsOf: sharedFile("images/bus.jpg"))
        XCTAssertEqual(Array(bus.suffix(2)), [0xFF, 0xD9])
        XCTAssertEqual(try Image(data: Data(bus.dropLast(2))), try Image(data: bus))
        XCTAssertThrowsError(try Image(data: Data(bus.prefix(bus.count / 2)))) { error in
            XCTAssertEqual(error as? ImageError, .truncated(file: "<data>"))
        }

        // A PNG without its IEND chunk is refused, as by cv2.imread.
        let png = [UInt8](try Image(pixels: ImageFixtures.pattern(width: 9, height: 7), width: 9, height: 7, format: .rgb).pngData())
        XCTAssertEqual(Array(png.suffix(12)), PNGBuilder.chunk("IEND", []))
        XCTAssertThrowsError(try Image(data: Data(png.dropLast(12)))) { error in
            guard case let .corrupt(file, reason) = error as? ImageError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, "<data>")
            XCTAssert(reason.contains("IEND"), reason)
        }
    }

    func testWriteErrors() throws {
        let directory = try ImageFixtures.temporaryDirectory()
        defer { try? FileManager.default.removeItem(at: directory) }
        let image = try Image(pixels: [0, 0, 0], width: 1, height: 1, format: .rgb)
        let bmp = directory.appendingPathComponent("x.bmp")
        XCTAssertThrowsError(try image.write(to: bmp)) { error in
            XCTAssertEqual(error as? ImageError, .unsupportedExtension(file: bmp.path))
        }
        let nowhere = directory.appendingPathComponent("no/such/dir/x.png")
        XCTAssertThrowsError(try image.write(to: nowhere)) { error in
            guard case .writeFailed(let file, _) = error as? ImageError else { return XCTFail("\(error)") }
            XCTAssertEqual(file, nowhere.path)
        }
    }
}

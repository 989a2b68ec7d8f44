import CImageDecode
import CJPEG
import CPNG
import Foundation

extension Image {
    /// Decodes a JPEG or PNG file, recognised by its first bytes, not its extension.
    /// - Parameters:
    ///   - url: the file.
    ///   - maxPixels: the largest width · height accepted, checked from the header before any
    ///     pixel memory is taken; raise it for larger images from trusted sources.
    public init(contentsOf url: URL, maxPixels: Int = Image.defaultMaxPixels) throws {
        if let kind = MediaFiles.irregularKind(atPath: url.path) {
            throw ImageError.unreadable(file: url.path, reason: "it is \(kind), not an image file")
        }
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            throw ImageError.unreadable(file: url.path, reason: error.localizedDescription)
        }
        try self.init(decoding: data, maxPixels: maxPixels, source: url.path)
    }

    /// Downloads the JPEG or PNG at an http(s) URL into a temporary file and decodes it; blocks
    /// the thread. The download fails after 30 s without a byte or past `maxPixels` · 4 bytes
    /// (more than a JPEG or PNG of that many pixels takes).
    package init(downloading url: URL, maxPixels: Int) throws {
        let file = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: file) }
        try Curl.download(url.absoluteString, to: file.path, timeout: 30, limit: maxPixels * 4)
        try self.init(decoding: try Data(contentsOf: file), maxPixels: maxPixels, source: url.absoluteString)
    }

    /// Whether an http(s) URL serves an image, as Ultralytics' `check_source` decides: its path
    /// has an image extension, or no image or video extension and a GET answers with an
    /// `image/…` Content-Type within 3 s. Anything else at such a URL is a stream or a video.
    package static func isServed(at url: URL) -> Bool {
        guard ["http", "https"].contains(url.scheme?.lowercased() ?? "") else { return false }
        let suffix = url.pathExtension.lowercased()
        if MediaFiles.imageExtensions.contains(suffix) { return true }
        if MediaFiles.videoExtensions.contains(suffix) { return false }
        return Curl.contentType(url.absoluteString, timeout: 3)?.lowercased().hasPrefix("image/") ?? false
    }

    /// Decodes a JPEG or PNG held in memory; see `init(contentsOf:maxPixels:)` for `maxPixels`.
    public init(data: Data, maxPixels: Int = Image.defaultMaxPixels) throws {
        try self.init(decoding: data, maxPixels: maxPixels, source: "<data>")
    }

    private init(decoding data: Data, maxPixels: Int, source: String) throws {
        guard !data.isEmpty else { throw ImageError.empty(file: source) }
        self = try data.withUnsafeBytes { bytes in
            if bytes.starts(with: [0xFF, 0xD8, 0xFF]) {
                return try JPEG.decode(bytes, maxPixels: maxPixels, source: source)
            }
            if bytes.starts(with: PNG.signature) {
                return try PNG.decode(bytes, maxPixels: maxPixels, source: source)
            }
            throw ImageError.unsupportedFormat(file: source)
        }
    }

    /// The image as a JPEG: 4:2:0 chroma subsampling, as `cv2.imwrite` and most cameras use, or
    /// none (`subsampled` false, 4:4:4, as Ultralytics saves crops with PIL's `subsampling=0`).
    public func jpegData(quality: Int = 90, subsampled: Bool = true) throws -> Data {
        try JPEG.encode(self, quality: quality, subsampled: subsampled)
    }

    /// The image as an 8-bit RGB PNG.
    public func pngData() throws -> Data {
        try PNG.encode(self)
    }
}

/// `count` elements written by `fill`, which throws if it fails. They are not zeroed first:
/// a large block comes fresh from the system and only the pages written take memory, so a
/// file claiming more pixels than its data holds fails before the whole size is resident.
private func decoded<T: BitwiseCopyable>(count: Int, _ fill: (UnsafeMutablePointer<T>) throws -> Void) throws -> [T] {
    try [T](unsafeUninitializedCapacity: count) { buffer, initialized in
        try fill(buffer.baseAddress!)
        initialized = count
    }
}

/// JPEG decoding through libjpeg's full API (see CImageDecode), row by row; encoding through
/// TurboJPEG.
enum JPEG {
    static func decode(_ bytes: UnsafeRawBufferPointer, maxPixels: Int, source: String) throws -> Image {
        var width: Int32 = 0, height: Int32 = 0, cmyk: Int32 = 0
        guard let decoder = yolo_jpeg_open(bytes.assumingMemoryBound(to: UInt8.self).baseAddress, bytes.count,
                                           &width, &height, &cmyk) else {
            throw ImageError.corrupt(file: source, reason: "no memory to start the JPEG decoder")
        }
        defer { yolo_jpeg_close(decoder) }
        guard width > 0 else {
            throw ImageError.corrupt(file: source, reason: String(cString: yolo_jpeg_message(decoder)))
        }
        try Image.checkSize(width: Int(width), height: Int(height), maxPixels: maxPixels, source: source)
        var out: [UInt8] = try decoded(count: Int(width) * Int(height) * (cmyk != 0 ? 4 : 3)) { out in
            switch yolo_jpeg_decode(decoder, out) {
            case 0: return
            // libjpeg would fill the rest with gray and cv2.imread return it so; here it is an error.
            case 1: throw ImageError.truncated(file: source)
            default: throw ImageError.corrupt(file: source, reason: String(cString: yolo_jpeg_message(decoder)))
            }
        }
        if cmyk != 0 { out = cmykToRGB(out) }
        let image = Image(width: Int(width), height: Int(height), rgb: out)
        return image.applyingOrientation(exifOrientation(bytes))
    }

    /// OpenCV's `icvCvt_CMYK2BGR_8u_C4C3R` on libjpeg's CMYK output.
    private static func cmykToRGB(_ cmyk: [UInt8]) -> [UInt8] {
        var rgb = [UInt8](repeating: 0, count: cmyk.count / 4 * 3)
        for i in 0..<cmyk.count / 4 {
            let k = Int(cmyk[4 * i + 3])
            for c in 0..<3 {
                rgb[3 * i + c] = UInt8(k - (((255 - Int(cmyk[4 * i + c])) * k) >> 8))
            }
        }
        return rgb
    }

    /// The orientation in the first APP1 segment before the first scan, read as OpenCV reads
    /// it: the TIFF data 6 bytes in (after "Exif\0\0"), whatever the segment is; 1 if none.
    static func exifOrientation(_ bytes: UnsafeRawBufferPointer) -> Int {
        var pos = 2  // after SOI
        while pos + 4 <= bytes.count, bytes[pos] == 0xFF {
            let marker = bytes[pos + 1]
            if marker == 0xFF { pos += 1; continue }  // fill byte
            if marker == 0x01 || (0xD0...0xD8).contains(marker) { pos += 2; continue }  // no length
            if marker == 0xDA || marker == 0xD9 { break }  // SOS, EOI
            let end = pos + 2 + (Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3]))
            guard end <= bytes.count else { break }
            if marker == 0xE1 {
                return pos + 10 < end ? tiffOrientation(UnsafeRawBufferPointer(rebasing: bytes[(pos + 10)..<end])) : 1
            }
            pos = end
        }
        return 1
    }
}

/// The Orientation tag (0x0112) of a TIFF header's first IFD, 1 when absent or unreadable.
func tiffOrientation(_ tiff: UnsafeRawBufferPointer) -> Int {
    guard tiff.count >= 8, tiff[0] == tiff[1], tiff[0] == 0x49 || tiff[0] == 0x4D else { return 1 }
    let little = tiff[0] == 0x49  // "II", else "MM"
    func u16(_ at: Int) -> Int? {
        guard at >= 0, at + 2 <= tiff.count else { return nil }
        return little ? Int(tiff[at]) | Int(tiff[at + 1]) << 8 : Int(tiff[at]) << 8 | Int(tiff[at + 1])
    }
    func u32(_ at: Int) -> Int? {
        guard let a = u16(at), let b = u16(at + 2) else { return nil }
        return little ? a | b << 16 : a << 16 | b
    }
    guard u16(2) == 42, let ifd = u32(4), let entries = u16(ifd) else { return 1 }
    for i in 0..<entries {
        let entry = ifd + 2 + 12 * i
        guard let tag = u16(entry) else { break }
        if tag == 0x0112 { return u16(entry + 8) ?? 1 }
    }
    return 1
}

/// PNG through libpng's simplified API, whose calls return errors instead of longjmp-ing.
enum PNG {
    static let signature: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]

    /// Chunks that would make libpng convert samples between gammas; OpenCV ignores them.
    private static let colorManagement: Set<String> = ["gAMA", "sRGB", "iCCP", "cHRM", "cICP"]

    static func decode(_ bytes: UnsafeRawBufferPointer, maxPixels: Int, source: String) throws -> Image {
        // Rebuild the stream without the colour-management chunks, and find eXIf and IEND on
        // the way. A malformed chunk list is passed on as it is, for libpng to report.
        var stream = signature
        stream.reserveCapacity(bytes.count)
        var orientation = 1
        var ended = false
        var pos = signature.count
        while pos + 12 <= bytes.count {
            let length = Int(bytes[pos]) << 24 | Int(bytes[pos + 1]) << 16 | Int(bytes[pos + 2]) << 8 | Int(bytes[pos + 3])
            let end = pos + 12 + length
            guard end <= bytes.count else { break }
            let type = String(decoding: bytes[(pos + 4)..<(pos + 8)], as: UTF8.self)
            if type == "eXIf" {
                orientation = tiffOrientation(UnsafeRawBufferPointer(rebasing: bytes[(pos + 8)..<(end - 4)]))
            }
            if type == "IEND" { ended = true }
            if !colorManagement.contains(type) { stream += bytes[pos..<end] }
            pos = end
        }
        stream += bytes[pos...]

        var png = png_image()
        png.version = png_uint_32(PNG_IMAGE_VERSION)
        let image: Image = try stream.withUnsafeBytes { data in
            guard png_image_begin_read_from_memory(&png, data.baseAddress, data.count) != 0 else {
                throw ImageError.corrupt(file: source, reason: message(png))
            }
            do {
                try Image.checkSize(width: Int(png.width), height: Int(png.height), maxPixels: maxPixels, source: source)
            } catch {
                png_image_free(&png)
                throw error
            }
            let width = Int(png.width), height = Int(png.height), count = width * height
            let alpha = png.format & PNG_FORMAT_FLAG_ALPHA != 0
            let sixteen = png.format & PNG_FORMAT_FLAG_LINEAR != 0
            let channels = alpha ? 4 : 3
            // RGB(A) at the file's depth: libpng expands palettes, tRNS and gray, and with the
            // colour-management chunks gone it converts no sample values. It keeps 8-bit alpha
            // separate; the 16-bit formats premultiply it. libpng writes the rows one by one
            // and fails at the first it lacks data for.
            png.format = PNG_FORMAT_FLAG_COLOR | (alpha ? PNG_FORMAT_FLAG_ALPHA : 0) | (sixteen ? PNG_FORMAT_FLAG_LINEAR : 0)
            func read<T: BitwiseCopyable>(_: T.Type, channels: Int) throws -> [T] {
                try decoded(count: count * channels) { samples in
                    guard png_image_finish_read(&png, nil, samples, 0, nil) != 0 else {
                        throw ImageError.corrupt(file: source, reason: message(png))
                    }
                }
            }
            if sixteen {
                let samples = try read(UInt16.self, channels: channels)
                var rgb = [UInt8](repeating: 0, count: count * 3)
                for i in 0..<count {
                    let a = alpha ? UInt32(samples[channels * i + 3]) : 65535
                    for c in 0..<3 {
                        // Undo libpng's premultiplication (exact for opaque pixels), then keep
                        // the high byte as OpenCV does.
                        var v = UInt32(samples[channels * i + c])
                        if a != 65535 { v = a == 0 ? 0 : min(65535, (v * 65535 + a / 2) / a) }
                        rgb[3 * i + c] = UInt8(v >> 8)
                    }
                }
                return Image(width: width, height: height, rgb: rgb)
            }
            if alpha {
                let samples = try read(UInt8.self, channels: 4)
                var rgb = [UInt8](repeating: 0, count: count * 3)
                for i in 0..<count {
                    rgb[3 * i] = samples[4 * i]
                    rgb[3 * i + 1] = samples[4 * i + 1]
                    rgb[3 * i + 2] = samples[4 * i + 2]
                }
                return Image(width: width, height: height, rgb: rgb)
            }
            return Image(width: width, height: height, rgb: try read(UInt8.self, channels: 3))
        }
        // libpng's simplified API stops after the image data; OpenCV reads on to IEND.
        guard ended else { throw ImageError.corrupt(file: source, reason: "no IEND chunk after the image data: the file ends early") }
        return image.applyingOrientation(orientation)
    }

    static func encode(_ image: Image) throws -> Data {
        var png = png_image()
        png.version = png_uint_32(PNG_IMAGE_VERSION)
        png.width = png_uint_32(image.width)
        png.height = png_uint_32(image.height)
        png.format = PNG_FORMAT_RGB
        var size = 0
        guard png_image_write_to_memory(&png, nil, &size, 0, image.pixels, 0, nil) != 0 else {
            throw ImageError.writeFailed(file: "<memory>", reason: message(png))
        }
        var out = [UInt8](repeating: 0, count: size)
        guard png_image_write_to_memory(&png, &out, &size, 0, image.pixels, 0, nil) != 0 else {
            throw ImageError.writeFailed(file: "<memory>", reason: message(png))
        }
        return Data(out[..<size])
    }

    private static func message(_ png: png_image) -> String {
        withUnsafeBytes(of: png.message) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
    }
}

extension JPEG {
    static func encode(_ image: Image, quality: Int, subsampled: Bool) throws -> Data {
        guard let handle = tjInitCompress() else {
            throw ImageError.writeFailed(file: "<memory>", reason: "cannot start the JPEG encoder")
        }
        defer { tjDestroy(handle) }
        var jpeg: UnsafeMutablePointer<UInt8>?
        var size: UInt = 0
        defer { tjFree(jpeg) }
        let status = tjCompress2(handle, image.pixels, Int32(image.width), 0, Int32(image.height), Int32(TJPF_RGB.rawValue),
                                 &jpeg, &size, Int32((subsampled ? TJSAMP_420 : TJSAMP_444).rawValue),
                                 Int32(min(max(quality, 1), 100)), 0)
        guard status == 0, let jpeg else {
            throw ImageError.writeFailed(file: "<memory>", reason: String(cString: tjGetErrorStr2(handle)))
        }
        return Data(bytes: jpeg, count: Int(size))
    }
}

import Foundation

/// An 8-bit RGB image, rows top to bottom, channels interleaved:
/// `pixels[(y · width + x) · 3 + c]` with c = 0, 1, 2 for red, green, blue.
///
/// Files decode the way Ultralytics reads them (`cv2.imread`, `IMREAD_COLOR`): JPEG or PNG
/// by their first bytes, gray replicated to three channels, palettes expanded, alpha dropped
/// without compositing, 16-bit samples cut to their high byte, the EXIF orientation applied.
public struct Image: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// `width · height · 3` bytes.
    public internal(set) var pixels: [UInt8]

    /// The pixel budget of decoding unless the caller gives another: a header claiming more is
    /// refused before any pixel memory is taken, as corrupt or hostile (10⁸ pixels are
    /// 300 MB of RGB).
    public static let defaultMaxPixels = 100_000_000

    /// Interleaved 8-bit layouts, rows packed.
    public enum PixelFormat: Sendable {
        case rgb, bgr, rgba, bgra, gray

        var channels: Int {
            switch self {
            case .rgb, .bgr: 3
            case .rgba, .bgra: 4
            case .gray: 1
            }
        }
    }

    /// An image from raw pixels; alpha is dropped without compositing, gray is replicated. RGB
    /// pixels are kept as they are, not copied.
    public init(pixels: [UInt8], width: Int, height: Int, format: PixelFormat) throws {
        guard width > 0, height > 0 else {
            throw ImageError.invalidPixels(reason: "size \(width)×\(height) has no pixels")
        }
        let (count, overflow) = width.multipliedReportingOverflow(by: height)
        guard !overflow, pixels.count / format.channels == count, pixels.count % format.channels == 0 else {
            throw ImageError.invalidPixels(
                reason: "\(width)×\(height) \(format) does not match its \(pixels.count) bytes")
        }
        let (r, g, b, step): (Int, Int, Int, Int)
        switch format {
        case .rgb:
            self.init(width: width, height: height, rgb: pixels)
            return
        case .bgr: (r, g, b, step) = (2, 1, 0, 3)
        case .rgba: (r, g, b, step) = (0, 1, 2, 4)
        case .bgra: (r, g, b, step) = (2, 1, 0, 4)
        case .gray: (r, g, b, step) = (0, 0, 0, 1)
        }
        // Through buffer pointers: the array subscripts' bounds checks kept this loop scalar,
        // 1.2–1.4 ms for a 640×360 frame against 0.02.
        let rgb = [UInt8](unsafeUninitializedCapacity: count * 3) { out, initialized in
            pixels.withUnsafeBufferPointer { source in
                for i in 0..<count {
                    let s = i * step
                    out[3 * i] = source[s + r]
                    out[3 * i + 1] = source[s + g]
                    out[3 * i + 2] = source[s + b]
                }
            }
            initialized = count * 3
        }
        self.init(width: width, height: height, rgb: rgb)
    }

    /// Pixels already in this type's layout.
    init(width: Int, height: Int, rgb: [UInt8]) {
        precondition(rgb.count == width * height * 3, "\(width)×\(height) RGB needs \(width * height * 3) bytes, got \(rgb.count)")
        self.width = width
        self.height = height
        self.pixels = rgb
    }

    /// Throws `invalidPixels` for a size without pixels and `tooLarge` for one over the pixel
    /// budget (the product checked for overflow: stdin and video sizes are any Int).
    static func checkSize(width: Int, height: Int, maxPixels: Int = defaultMaxPixels, source: String) throws {
        guard width > 0, height > 0 else {
            throw ImageError.invalidPixels(reason: "\(source): size \(width)×\(height) has no pixels")
        }
        let (pixels, overflow) = width.multipliedReportingOverflow(by: height)
        guard !overflow, pixels <= maxPixels else {
            throw ImageError.tooLarge(file: source, width: width, height: height, maxPixels: maxPixels)
        }
    }

    /// Writes a JPEG (`.jpg`, `.jpeg`) or PNG (`.png`), chosen by the extension.
    public func write(to url: URL) throws {
        let data: Data
        do {
            switch url.pathExtension.lowercased() {
            case "jpg", "jpeg": data = try jpegData()
            case "png": data = try pngData()
            default: throw ImageError.unsupportedExtension(file: url.path)
            }
        } catch let ImageError.writeFailed(_, reason) {
            throw ImageError.writeFailed(file: url.path, reason: reason)
        }
        do {
            try data.write(to: url, options: .atomic)
        } catch {
            // Foundation's own text is "error 512"; the system's error under it says why.
            let cause = (error as NSError).userInfo[NSUnderlyingErrorKey] as? POSIXError
            throw ImageError.writeFailed(file: url.path, reason: cause.map { String(cString: strerror($0.code.rawValue)) }
                                         ?? error.localizedDescription)
        }
    }

    /// The image turned upright by EXIF orientation `orientation` (1…8, TIFF tag 0x0112), as
    /// OpenCV's `imread` applies it; other values leave it unchanged.
    package func applyingOrientation(_ orientation: Int) -> Image {
        guard (2...8).contains(orientation) else { return self }
        let transposed = orientation >= 5
        let (w, h) = transposed ? (height, width) : (width, height)
        var out = [UInt8](repeating: 0, count: pixels.count)
        for y in 0..<h {
            for x in 0..<w {
                // The source pixel of output (x, y).
                let (sx, sy) = switch orientation {
                case 2: (width - 1 - x, y)  // mirrored horizontally
                case 3: (width - 1 - x, height - 1 - y)  // rotated 180°
                case 4: (x, height - 1 - y)  // mirrored vertically
                case 5: (y, x)  // transposed
                case 6: (y, height - 1 - x)  // needs 90° clockwise
                case 7: (width - 1 - y, height - 1 - x)  // transverse
                default: (width - 1 - y, x)  // 8: needs 90° counter-clockwise
                }
                let s = (sy * width + sx) * 3, d = (y * w + x) * 3
                out[d] = pixels[s]
                out[d + 1] = pixels[s + 1]
                out[d + 2] = pixels[s + 2]
            }
        }
        return Image(width: w, height: h, rgb: out)
    }
}

/// Why an image could not be read, built or written.
public enum ImageError: Error, LocalizedError, Equatable {
    /// The file could not be read at all (missing, a directory, no permission).
    case unreadable(file: String, reason: String)
    /// The file or buffer holds no bytes.
    case empty(file: String)
    /// Neither a JPEG nor a PNG by its first bytes.
    case unsupportedFormat(file: String)
    /// The JPEG or PNG decoder rejected the data.
    case corrupt(file: String, reason: String)
    /// A JPEG stream that ends before its image data does.
    case truncated(file: String)
    /// A header claiming more pixels than the decoder's `maxPixels` budget.
    case tooLarge(file: String, width: Int, height: Int, maxPixels: Int)
    /// A pixel buffer that does not match its stated size and format.
    case invalidPixels(reason: String)
    /// `write(to:)` knows only `.jpg`, `.jpeg` and `.png`.
    case unsupportedExtension(file: String)
    /// Encoding or writing the file failed.
    case writeFailed(file: String, reason: String)

    public var errorDescription: String? {
        switch self {
        case let .unreadable(file, reason): "cannot read \(file): \(reason)"
        case let .empty(file): "\(file) is empty"
        case let .unsupportedFormat(file): "\(file) is not a JPEG or PNG image"
        case let .corrupt(file, reason): "\(file) is corrupt: \(reason)"
        case let .truncated(file): "\(file) is truncated: the JPEG data ends early"
        case let .tooLarge(file, width, height, maxPixels):
            "\(file) claims \(width)×\(height) pixels, more than the budget of \(maxPixels); "
                + "for a trusted file raise it with Image(contentsOf:maxPixels:) or YOLOConfiguration.maxImagePixels"
        case let .invalidPixels(reason): "invalid pixels: \(reason)"
        case let .unsupportedExtension(file): "cannot write \(file): use .jpg, .jpeg or .png"
        case let .writeFailed(file, reason): "cannot write \(file): \(reason)"
        }
    }
}

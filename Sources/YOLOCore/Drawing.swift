import Foundation

/// An 8-bit RGB colour.
package struct RGB: Sendable, Equatable {
    package let r, g, b: UInt8

    /// `0xRRGGBB`.
    package init(_ hex: UInt32) {
        r = UInt8(hex >> 16 & 0xFF)
        g = UInt8(hex >> 8 & 0xFF)
        b = UInt8(hex & 0xFF)
    }
}

/// Box colours by class index modulo 20: lime #CFFF1A for the first class (the product's
/// default), then Ultralytics' `Colors.hexs` (8.4.190) entries 1…19.
private let palette: [RGB] = [
    0xCFFF1A, 0x0BDBEB, 0xF3F3F3, 0x00DFB7, 0x111F68, 0xFF6FDD, 0xFF444F, 0xCCED00, 0x00F344, 0xBD00FF,
    0x00B4FF, 0xDD00BA, 0x00FFFF, 0x26C000, 0x01FFB3, 0x7D24FF, 0x7B0068, 0xFF1B6C, 0xFC6D2F, 0xA2FF0B,
].map(RGB.init)

extension DetectionResult {
    /// A copy of `image` with every box drawn the way Ultralytics' `Results.plot()` draws it
    /// (OpenCV path, its default): an outline in the class colour and, above the box (inside it
    /// when there is no room), a label in that colour reading "name conf".
    ///
    /// - Parameter lineWidth: outline width in pixels, clamped to 0.5…3 and rounded (at least 1).
    ///   By default Ultralytics' `max(round((h + w + 3) / 2 · 0.003), 2)`, where the 3 is the
    ///   channel count, because it sums the whole `(h, w, 3)` array shape.
    /// - Throws: `YOLOError.invalidImage` when the result holds no image, as results decoded from
    ///   JSON do; `YOLOError.invalidConfiguration` when `lineWidth` is NaN.
    public func annotated(lineWidth: Double? = nil) throws -> Image {
        guard var canvas = image else {
            throw YOLOError.invalidImage(source: path ?? "result",
                                         reason: "the result holds no image (results decoded from JSON do not); annotate a result returned by predict")
        }
        let thickness: Int
        if let lineWidth {
            guard !lineWidth.isNaN else {
                throw YOLOError.invalidConfiguration(field: "lineWidth", value: "nan", reason: "must be a number in 0.5…3")
            }
            thickness = max(1, Int(min(max(lineWidth, 0.5), 3).rounded()))
        } else {
            let derived = (Double(canvas.height + canvas.width + 3) / 2 * 0.003).rounded(.toNearestOrEven)
            thickness = max(Int(derived), 2)
        }
        // Lowest confidence first, so the most confident box ends on top, as in Ultralytics.
        for box in boxes.reversed() {
            canvas.drawLabeledBox(box, lineWidth: thickness)
        }
        return canvas
    }
}

extension Image {
    /// Fills columns `x0..<x1` of rows `y0..<y1`, clipped to the image.
    package mutating func fillRectangle(x0: Int, y0: Int, x1: Int, y1: Int, color: RGB) {
        let left = max(x0, 0), right = min(x1, width), top = max(y0, 0), bottom = min(y1, height)
        guard left < right, top < bottom else { return }
        for y in top..<bottom {
            var i = (y * width + left) * 3
            for _ in left..<right {
                pixels[i] = color.r
                pixels[i + 1] = color.g
                pixels[i + 2] = color.b
                i += 3
            }
        }
    }

    /// Outlines the rectangle with corner pixels (x0, y0) and (x1, y1) by lines `thickness`
    /// pixels wide centred on its edges, as `cv2.rectangle` does; clipped to the image.
    package mutating func strokeRectangle(x0: Int, y0: Int, x1: Int, y1: Int, thickness: Int, color: RGB) {
        let before = thickness / 2, after = thickness - before  // the line covers edge - before ..< edge + after
        fillRectangle(x0: x0 - before, y0: y0 - before, x1: x1 + after, y1: y0 + after, color: color)
        fillRectangle(x0: x0 - before, y0: y1 - before, x1: x1 + after, y1: y1 + after, color: color)
        fillRectangle(x0: x0 - before, y0: y0 + after, x1: x0 + after, y1: y1 - before, color: color)
        fillRectangle(x0: x1 - before, y0: y0 + after, x1: x1 + after, y1: y1 - before, color: color)
    }

    /// Width and height in pixels of `text` drawn at `scale`, descenders included.
    package static func textSize(_ text: String, scale: Int) -> (width: Int, height: Int) {
        let gap = BitmapFont.advance - BitmapFont.glyphWidth  // none after the last glyph
        return (max(text.count * BitmapFont.advance - gap, 0) * scale, BitmapFont.glyphHeight * scale)
    }

    /// Draws `text` in the bitmap font, each font pixel a `scale`×`scale` square, its top-left
    /// corner at (x, y); clipped to the image.
    package mutating func drawText(_ text: String, x: Int, y: Int, scale: Int, color: RGB) {
        for (n, character) in text.enumerated() {
            let left = x + n * BitmapFont.advance * scale
            for row in 0..<BitmapFont.glyphHeight {
                for column in 0..<BitmapFont.glyphWidth where BitmapFont.ink(character, row: row, column: column) {
                    let px = left + column * scale, py = y + row * scale
                    fillRectangle(x0: px, y0: py, x1: px + scale, y1: py + scale, color: color)
                }
            }
        }
    }

    /// One box as Ultralytics' `Annotator.box_label` draws it with OpenCV. The text scale equals the
    /// line width so capitals are 7·lineWidth pixels tall, the cap height of OpenCV's Hershey font
    /// at Ultralytics' font scale lineWidth / 3.
    mutating func drawLabeledBox(_ box: Box, lineWidth: Int) {
        guard box.xyxy.count == 4, box.xyxy.allSatisfy({ $0.isFinite }) else { return }
        // Coordinates this far out are clipped anyway; the bound keeps Int(_:) from trapping.
        let c = box.xyxy.map { Int(min(max($0, -1e6), 1e6)) }
        let color = palette[(box.cls % palette.count + palette.count) % palette.count]
        strokeRectangle(x0: c[0], y0: c[1], x1: c[2], y1: c[3], thickness: lineWidth, color: color)

        let label = "\(box.name) \(String(format: "%.2f", Double(box.conf)))"
        let scale = lineWidth, text = Self.textSize(label, scale: scale)
        let pillWidth = text.width + 2 * scale, pillHeight = text.height + 2
        let outside = c[1] >= pillHeight
        // Ultralytics shifts a label that would cross the right edge inside; this also does it at
        // the left edge, for boxes starting outside the image.
        let left = max(min(c[0], width - pillWidth), 0)
        let top = outside ? c[1] - pillHeight : c[1]
        // A black pill with white text reads on any box colour.
        fillRectangle(x0: left, y0: top, x1: left + pillWidth, y1: top + pillHeight, color: RGB(0x000000))
        drawText(label, x: left + scale, y: top + 1, scale: scale, color: RGB(0xFFFFFF))
    }
}

// Results built without a model, for tests and tools: the memberwise initializers are internal.
extension Box {
    /// A box on `image`, whose size becomes `originalShape`.
    package init(xyxy: [Float], conf: Float, cls: Int, name: String, in image: Image) {
        self.init(xyxy: xyxy, conf: conf, cls: cls, name: name, originalShape: [image.height, image.width])
    }
}

extension DetectionResult {
    /// `boxes` on `image`, with no input shape or timings.
    package init(image: Image, boxes: [Box]) {
        self.init(path: nil, originalShape: [image.height, image.width], inputShape: [], boxes: boxes,
                  speed: Speed(preprocess: 0, inference: 0, postprocess: 0), image: image)
    }
}

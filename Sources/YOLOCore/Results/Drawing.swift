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

/// Ultralytics' pose palette (`Colors.pose_palette`), as RGB (Ultralytics lists it BGR).
private let posePalette: [RGB] = [
    0x0080FF, 0x3399FF, 0x66B2FF, 0x00E6E6, 0xFF99FF, 0xFFCC99, 0xFF66FF, 0xFF33FF, 0xFFB266, 0xFF9933,
    0x9999FF, 0x6666FF, 0x3333FF, 0x99FF99, 0x66FF66, 0x33FF33, 0x00FF00, 0xFF0000, 0x0000FF, 0xFFFFFF,
].map(RGB.init)

/// COCO's skeleton, 1-based keypoint pairs, and the colours Ultralytics' `Annotator` gives its
/// limbs and keypoints.
private let skeleton: [(Int, Int)] = [
    (16, 14), (14, 12), (17, 15), (15, 13), (12, 13), (6, 12), (7, 13), (6, 7), (6, 8), (7, 9),
    (8, 10), (9, 11), (2, 3), (1, 2), (1, 3), (2, 4), (3, 5), (4, 6), (5, 7),
]
private let limbColors = [9, 9, 9, 9, 7, 7, 7, 0, 0, 0, 0, 0, 16, 16, 16, 16, 16, 16, 16].map { posePalette[$0] }
private let keypointColors = [16, 16, 16, 16, 16, 0, 0, 0, 0, 0, 0, 9, 9, 9, 9, 9, 9].map { posePalette[$0] }

func classColor(_ cls: Int) -> RGB { palette[(cls % palette.count + palette.count) % palette.count] }

extension Results {
    /// The image with the results drawn in the default style (`annotated()`); nil when the result
    /// holds no image, as results decoded from JSON.
    public var annotatedImage: Image? { try? annotated() }

    /// A copy of `image` with the results drawn the way Ultralytics' `Results.plot()` draws them
    /// (OpenCV path, its default), in this order: masks as translucent fills in the class colour
    /// (alpha 0.5), boxes (or rotated boxes as polygons) with a label reading "name conf"
    /// ("id:7 name conf" for a tracked box),
    /// the top-5 classes as text lines in the top-left corner, then keypoints (radius 5, those
    /// with confidence ≥ 0.25) and, for the 17 COCO keypoints, the skeleton.
    ///
    /// - Parameter lineWidth: outline width in pixels, clamped to 0.5…3 and rounded (at least 1);
    ///   by default the configuration's at prediction time, else Ultralytics'
    ///   `max(round((h + w + 3) / 2 · 0.003), 2)`, where the 3 is the
    ///   channel count, because it sums the whole `(h, w, 3)` array shape.
    /// - Parameters:
    ///   - labels: class names (and track IDs) in the labels; without them a label is the confidence.
    ///   - conf: confidences in the labels; with neither, boxes have no label.
    ///   - showBoxes: boxes and rotated boxes at all (masks, keypoints and classes are drawn anyway),
    ///     as Ultralytics' `plot(labels:conf:boxes:)`.
    /// - Throws: `YOLOError.invalidImage` when the result holds no image, as results decoded from
    ///   JSON do; `YOLOError.invalidConfiguration` when `lineWidth` is NaN.
    public func annotated(lineWidth: Double? = nil, labels: Bool = true, conf: Bool = true, boxes showBoxes: Bool = true) throws -> Image {
        guard var canvas = image else {
            throw YOLOError.invalidImage(source: path ?? "result",
                                         reason: "the result holds no image (results decoded from JSON do not); annotate a result returned by predict")
        }
        let thickness: Int
        if let lineWidth = lineWidth ?? self.lineWidth {
            guard !lineWidth.isNaN else {
                throw YOLOError.invalidConfiguration(field: "lineWidth", value: "nan", reason: "must be a number in 0.5…3")
            }
            thickness = max(1, Int(min(max(lineWidth, 0.5), 3).rounded()))
        } else {
            let derived = (Double(canvas.height + canvas.width + 3) / 2 * 0.003).rounded(.toNearestOrEven)
            thickness = max(Int(derived), 2)
        }
        let drawn = zip(masks, boxes).compactMap { mask, box in mask.bitmap.map { ($0, classColor(box.cls)) } }
        canvas.blendMasks(drawn, alpha: 0.5)
        // Ultralytics' label: "id:7 name 0.91", less what is not shown.
        func label(_ name: String, _ id: Int?, _ confidence: Float) -> String? {
            let value = String(format: "%.2f", Double(confidence))
            let named = (id.map { "id:\($0) " } ?? "") + name
            return labels ? (conf ? named + " " + value : named) : (conf ? value : nil)
        }
        // Lowest confidence first, so the most confident box ends on top, as in Ultralytics.
        for box in showBoxes ? boxes.reversed() : [] {
            canvas.drawLabeledBox(box, label: label(box.name, box.id, box.conf), lineWidth: thickness)
        }
        for box in showBoxes ? obb.reversed() : [] {
            canvas.drawLabeledPolygon(box.xyxyxyxy, label: label(box.name, box.id, box.conf), color: classColor(box.cls), lineWidth: thickness)
        }
        if let probs {
            let lines = probs.top5.map { "\(probs.name($0)) \(String(format: "%.2f", Double(probs.data[$0])))" }
            let margin = Int((Double(canvas.height) * 0.03).rounded(.toNearestOrEven))
            canvas.drawTextLines(lines, x: margin, y: margin, scale: thickness)
        }
        for k in keypoints.reversed() {
            canvas.drawKeypoints(k, radius: 5, lineWidth: thickness)
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
    mutating func drawLabeledBox(_ box: Box, label: String?, lineWidth: Int) {
        guard box.xyxy.count == 4, box.xyxy.allSatisfy({ $0.isFinite }) else { return }
        let c = box.xyxy.map(pixel)
        strokeRectangle(x0: c[0], y0: c[1], x1: c[2], y1: c[3], thickness: lineWidth, color: classColor(box.cls))
        if let label { drawLabel(label, x: c[0], y: c[1], lineWidth: lineWidth) }
    }

    /// A label pill whose bottom-left corner is (x, y), or whose top-left corner is when there
    /// is no room above (Ultralytics' `box_label` placement).
    mutating func drawLabel(_ label: String, x: Int, y: Int, lineWidth: Int) {
        let scale = lineWidth, text = Self.textSize(label, scale: scale)
        let pillWidth = text.width + 2 * scale, pillHeight = text.height + 2
        let outside = y >= pillHeight
        // Ultralytics shifts a label that would cross the right edge inside; this also does it at
        // the left edge, for boxes starting outside the image.
        let left = max(min(x, width - pillWidth), 0)
        let top = outside ? y - pillHeight : y
        // A black pill with white text reads on any box colour.
        fillRectangle(x0: left, y0: top, x1: left + pillWidth, y1: top + pillHeight, color: RGB(0x000000))
        drawText(label, x: left + scale, y: top + 1, scale: scale, color: RGB(0xFFFFFF))
    }
}

/// A coordinate as a pixel index: truncated toward zero like Python's int(); values this far
/// out are clipped anyway, and the bound keeps Int(_:) from trapping.
func pixel(_ v: Float) -> Int { v.isNaN ? 0 : Int(min(max(v, -1e6), 1e6)) }

extension Image {
    /// Ultralytics `Annotator.masks` (alpha blending of every mask at once): each pixel becomes
    /// image · Π(1 − alpha) over the masks covering it + alpha · the largest colour among them,
    /// per channel, truncated to 8 bits. Masks of another frame size are skipped.
    package mutating func blendMasks(_ masks: [(BinaryMask, RGB)], alpha: Float) {
        let masks = masks.filter { $0.0.width == width && $0.0.height == height && $0.0.area > 0 }
        guard !masks.isEmpty else { return }
        // Over the rectangle holding every mask: how many masks cover each pixel, and the largest
        // colour among them (4 bytes a pixel).
        let x0 = masks.map(\.0.region.x).min()!, y0 = masks.map(\.0.region.y).min()!
        let x1 = masks.map { $0.0.region.x + $0.0.region.width }.max()!, y1 = masks.map { $0.0.region.y + $0.0.region.height }.max()!
        let w = x1 - x0
        var cover = [SIMD4<UInt8>](repeating: .zero, count: w * (y1 - y0))
        for (mask, color) in masks {
            let c = SIMD4(color.r, color.g, color.b, 0), r = mask.region
            for y in 0..<r.height {
                for x in 0..<r.width where mask.pixels[y * r.width + x] != 0 {
                    let i = (r.y + y - y0) * w + r.x + x - x0
                    var v = pointwiseMax(cover[i], c)
                    v[3] = cover[i][3] == 255 ? 255 : cover[i][3] + 1
                    cover[i] = v
                }
            }
        }
        var inverse: [Float] = [1]  // (1 − alpha)^k, a product in Float32 like torch.prod
        for _ in 0..<255 { inverse.append(inverse[inverse.count - 1] * (1 - alpha)) }
        for y in y0..<y1 {
            for x in x0..<x1 {
                let v = cover[(y - y0) * w + x - x0]
                guard v[3] > 0 else { continue }
                for ch in 0..<3 {
                    let i = (y * width + x) * 3 + ch
                    let value = (Float(pixels[i]) / 255 * inverse[Int(v[3])] + Float(v[ch]) / 255 * alpha) * 255
                    pixels[i] = UInt8(min(max(value, 0), 255))
                }
            }
        }
    }

    /// A line `thickness` pixels wide between two points: every pixel whose centre lies within
    /// thickness / 2 of the segment (a capsule), row by row; clipped.
    package mutating func drawLine(_ a: SIMD2<Float>, _ b: SIMD2<Float>, thickness: Int, color: RGB) {
        guard a.x.isFinite, a.y.isFinite, b.x.isFinite, b.y.isFinite else { return }
        let radius = max(Float(thickness) / 2, 0.5)
        let y0 = max(Int((min(a.y, b.y) - radius).rounded(.down)), 0), y1 = min(Int((max(a.y, b.y) + radius).rounded(.up)), height - 1)
        guard y0 <= y1 else { return }
        let d = b - a, length = (d * d).sum().squareRoot()
        for y in y0...y1 {
            let py = Float(y)
            // The row's cross-section of the capsule (convex, so one interval): the two end discs
            // and the band along the segment.
            var lo = Float.infinity, hi = -Float.infinity
            for e in [a, b] {
                let h = radius * radius - (py - e.y) * (py - e.y)
                if h >= 0 { lo = min(lo, e.x - h.squareRoot()); hi = max(hi, e.x + h.squareRoot()) }
            }
            if length > 0 {
                // 0 ≤ (p − a)·d ≤ |d|² and |(p − a) × d| ≤ r·|d|, each linear in x.
                var l = -Float.infinity, u = Float.infinity
                func within(_ k: Float, _ c: Float, _ low: Float, _ high: Float) {
                    if k == 0 {
                        if c < low || c > high { l = .infinity; u = -.infinity }
                    } else {
                        let p = (low - c) / k, q = (high - c) / k
                        l = max(l, min(p, q)); u = min(u, max(p, q))
                    }
                }
                within(d.x, -a.x * d.x + (py - a.y) * d.y, 0, length * length)
                within(d.y, -a.x * d.y - (py - a.y) * d.x, -radius * length, radius * length)
                if l <= u { lo = min(lo, l); hi = max(hi, u) }
            }
            guard lo <= hi else { continue }
            let xs = max(Int(max(lo, -1).rounded(.up)), 0), xe = min(Int(min(hi, Float(width)).rounded(.down)), width - 1)
            guard xs <= xe else { continue }
            for x in xs...xe {
                let i = (y * width + x) * 3
                pixels[i] = color.r; pixels[i + 1] = color.g; pixels[i + 2] = color.b
            }
        }
    }

    /// A filled disc of `radius` pixels around (x, y), as `cv2.circle(..., -1)`; clipped.
    package mutating func fillCircle(x cx: Int, y cy: Int, radius: Int, color: RGB) {
        let r = max(radius, 0)
        let x0 = max(cx - r, 0), x1 = min(cx + r, width - 1), y0 = max(cy - r, 0), y1 = min(cy + r, height - 1)
        guard x0 <= x1, y0 <= y1 else { return }
        for y in y0...y1 {
            for x in x0...x1 where (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r {
                let i = (y * width + x) * 3
                pixels[i] = color.r; pixels[i + 1] = color.g; pixels[i + 2] = color.b
            }
        }
    }

    /// A rotated box as `box_label` draws a polygon: the closed outline through the corners
    /// (truncated to whole pixels) and the label at the first corner.
    mutating func drawLabeledPolygon(_ corners: [SIMD2<Float>], label: String?, color: RGB, lineWidth: Int) {
        guard !corners.isEmpty, corners.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { return }
        let points = corners.map { SIMD2(Float(pixel($0.x)), Float(pixel($0.y))) }
        for i in points.indices {
            drawLine(points[i], points[(i + 1) % points.count], thickness: lineWidth, color: color)
        }
        if let label { drawLabel(label, x: Int(points[0].x), y: Int(points[0].y), lineWidth: lineWidth) }
    }

    /// Lines of white text on translucent dark-grey pills (Ultralytics' RGBA (64, 64, 64, 128)
    /// text box), one under the other from (x, y).
    mutating func drawTextLines(_ lines: [String], x: Int, y: Int, scale: Int) {
        var top = y
        for line in lines {
            let text = Self.textSize(line, scale: scale)
            let pillWidth = text.width + 2 * scale, pillHeight = text.height + 2
            let grey = Float(64) * 128 / 255
            let px0 = max(x, 0), px1 = min(x + pillWidth, width), py0 = max(top, 0), py1 = min(top + pillHeight, height)
            if px0 < px1 && py0 < py1 {
                for py in py0..<py1 {
                    for i in ((py * width + px0) * 3)..<((py * width + px1) * 3) {
                        pixels[i] = UInt8(min(Float(pixels[i]) * (1 - 128 / 255) + grey, 255))
                    }
                }
            }
            drawText(line, x: x + scale, y: top + 1, scale: scale, color: RGB(0xFFFFFF))
            top += pillHeight
        }
    }

    /// Ultralytics `Annotator.kpts`: a disc per keypoint with confidence ≥ 0.25 (or any keypoint
    /// without confidences but at (0, 0)), then for the 17 COCO keypoints the skeleton's limbs
    /// between keypoints that both pass, `ceil(lineWidth / 2)` wide.
    mutating func drawKeypoints(_ k: Keypoints, radius: Int, lineWidth: Int) {
        let threshold: Float = 0.25
        let isPose = k.xy.count == 17
        func visible(_ i: Int) -> Bool {
            guard i < k.xy.count, k.xy[i].x.isFinite, k.xy[i].y.isFinite else { return false }
            return k.conf.count == k.xy.count ? k.conf[i] >= threshold : k.xy[i] != .zero
        }
        for i in k.xy.indices where visible(i) {
            fillCircle(x: pixel(k.xy[i].x), y: pixel(k.xy[i].y), radius: radius,
                       color: isPose ? keypointColors[i] : classColor(i))
        }
        guard isPose else { return }
        for (n, (a, b)) in skeleton.enumerated() where visible(a - 1) && visible(b - 1) {
            let p = SIMD2(Float(pixel(k.xy[a - 1].x)), Float(pixel(k.xy[a - 1].y)))
            let q = SIMD2(Float(pixel(k.xy[b - 1].x)), Float(pixel(k.xy[b - 1].y)))
            guard min(p.x, p.y, q.x, q.y) >= 0 else { continue }
            drawLine(p, q, thickness: (lineWidth + 1) / 2, color: limbColors[n])
        }
    }
}

// Results built without a model, for tests and tools: the memberwise initializers are internal.
extension Box {
    /// A box on `image`, whose size becomes `originalShape`.
    package init(xyxy: [Float], conf: Float, cls: Int, name: String, in image: Image) {
        self.init(xyxy: xyxy, conf: conf, cls: cls, name: name, originalShape: [image.height, image.width])
    }
}

extension Results {
    /// `boxes` on `image`, with no input shape or timings.
    package init(image: Image, boxes: [Box]) {
        self.init(task: .detect, originalShape: [image.height, image.width], inputShape: [], boxes: boxes, image: image)
    }
}

extension Mask {
    /// A mask drawn on an image: `bitmap` in the image's frame, no input-resolution copy.
    package init(bitmap: BinaryMask, polygon: [SIMD2<Float>] = []) {
        self.init(bitmap: bitmap, inputBitmap: nil, area: bitmap.area, xy: polygon, originalShape: [bitmap.height, bitmap.width])
    }
}

extension Keypoints {
    package init(xy: [SIMD2<Float>], conf: [Float], in image: Image) {
        self.init(xy: xy, conf: conf, originalShape: [image.height, image.width])
    }
}

extension OrientedBox {
    package init(xywhr: [Float], conf: Float, cls: Int, name: String, in image: Image) {
        self.init(xywhr: xywhr, conf: conf, cls: cls, name: name, originalShape: [image.height, image.width])
    }
}

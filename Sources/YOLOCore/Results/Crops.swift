extension Results {
    /// Each box's region of the image, in box order, as Ultralytics' `save_crop` cuts it
    /// (`save_one_box` with gain 1.02 and pad 10): the box grown about its centre to width and
    /// height × 1.02 + 10 pixels, in Float32, the corners truncated to whole pixels and clipped
    /// to the image. A rotated box (obb) is turned upright instead, `rotatedCrop`. None for
    /// classify results, results without an image, or a box wholly outside the image.
    public func crops() -> [(name: String, image: Image)] {
        guard let image else { return [] }
        if !obb.isEmpty {
            return obb.compactMap { box in image.rotatedCrop(box.xyxyxyxy).map { (box.name, $0) } }
        }
        return boxes.compactMap { box in
            guard box.xyxy.count == 4, box.xyxy.allSatisfy({ $0.isFinite }) else { return nil }
            let b = box.xyxy
            let center = SIMD2((b[0] + b[2]) / 2, (b[1] + b[3]) / 2)
            let half = (SIMD2(b[2] - b[0], b[3] - b[1]) * 1.02 + 10) / 2
            let low = center - half, high = center + half
            // torch's .long() truncates toward zero; the bounds keep Int(_:) from trapping.
            func side(_ v: Float, _ limit: Int) -> Int { min(max(Int(min(max(v, -1e9), 1e9)), 0), limit) }
            let x0 = side(low.x, image.width), x1 = side(high.x, image.width)
            let y0 = side(low.y, image.height), y1 = side(high.y, image.height)
            guard x0 < x1, y0 < y1 else { return nil }
            var pixels = [UInt8]()
            pixels.reserveCapacity((x1 - x0) * (y1 - y0) * 3)
            for y in y0..<y1 {
                pixels += image.pixels[((y * image.width + x0) * 3)..<((y * image.width + x1) * 3)]
            }
            return (box.name, Image(width: x1 - x0, height: y1 - y0, rgb: pixels))
        }
    }
}

extension Image {
    /// A rotated box's corners p0…p3 turned upright as `save_one_box` does: `cv2.warpAffine`
    /// sending p0, p1, p2 to (w, h), (w, 0), (0, 0), with w = |p0 − p3| and h = |p0 − p1| rounded
    /// (at least 1), bilinear, black outside the image; the gain and pad then cover the whole
    /// warp. As OpenCV 5's kernels: source positions and interpolation in fused Float32, rounded
    /// half to even (its results differ by 1 in about 2 of 10⁴ values). Nil for corners that are
    /// not finite or a crop over the pixel budget.
    func rotatedCrop(_ p: [SIMD2<Float>]) -> Image? {
        guard p.count == 4, p.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else { return nil }
        func length(_ v: SIMD2<Float>) -> Int {
            Int(min(Double((v * v).sum().squareRoot()), 1e9).rounded(.toNearestOrEven))
        }
        let w = max(length(p[0] - p[3]), 1), h = max(length(p[0] - p[1]), 1)
        guard w * h <= Image.defaultMaxPixels else { return nil }
        // The inverse map, destination (x, y) → source p2 + x/w·(p1 − p2) + y/h·(p0 − p1).
        let a = SIMD2<Float>(SIMD2<Double>(p[1] - p[2]) / Double(w)), b = SIMD2<Float>(SIMD2<Double>(p[0] - p[1]) / Double(h))
        let c = p[2]
        func pixel(_ x: Int, _ y: Int) -> SIMD3<Float> {
            guard x >= 0, y >= 0, x < width, y < height else { return .zero }
            let i = (y * width + x) * 3
            return SIMD3(Float(pixels[i]), Float(pixels[i + 1]), Float(pixels[i + 2]))
        }
        func lerp(_ u: SIMD3<Float>, _ v: SIMD3<Float>, _ t: Float) -> SIMD3<Float> { u.addingProduct(t, v - u) }
        var out = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h {
            let row = c.addingProduct(b, Float(y))
            for x in 0..<w {
                let s = row.addingProduct(a, Float(x))
                guard abs(s.x) < 1e9, abs(s.y) < 1e9 else { continue }
                let x0 = Int(s.x.rounded(.down)), y0 = Int(s.y.rounded(.down))
                let fx = s.x - Float(x0), fy = s.y - Float(y0)
                let v = lerp(lerp(pixel(x0, y0), pixel(x0 + 1, y0), fx), lerp(pixel(x0, y0 + 1), pixel(x0 + 1, y0 + 1), fx), fy)
                let o = (y * w + x) * 3
                for ch in 0..<3 { out[o + ch] = UInt8(min(max(v[ch].rounded(.toNearestOrEven), 0), 255)) }
            }
        }
        return Image(width: w, height: h, rgb: out)
    }
}

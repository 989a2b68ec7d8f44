extension Results {
    /// Each box's region of the image, in box order, as Ultralytics' `save_crop` cuts it
    /// (`save_one_box` with gain 1.02 and pad 10): the box grown about its centre to width and
    /// height × 1.02 + 10 pixels, in Float32, the corners truncated to whole pixels and clipped
    /// to the image. Boxes of detect, segment and pose results; none for classify and obb
    /// results, for results without an image, or for a box wholly outside the image.
    public func crops() -> [(name: String, image: Image)] {
        guard let image, obb.isEmpty else { return [] }
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

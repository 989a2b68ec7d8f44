import Tensor

/// Ultralytics' preprocessing for classification models at predict time (8.4.190
/// `ClassificationPredictor` with `classify_transforms(imgsz)`), not the letterbox:
/// torchvision `Resize(size)` — shortest side to `size`, the other `int(size · long / short)`,
/// PIL's bilinear filter with antialiasing — then `CenterCrop(size)`, RGB / 255 and a
/// `Normalize` whose mean 0 and standard deviation 1 leave the values as they are.
package struct ClassifyTransform: Sendable, Equatable {
    /// Side of the square network input.
    package var size: Int

    package init(size: Int = 224) {
        self.size = size
    }

    /// The resized image's size: torchvision's `_compute_resized_output_size` for an int size.
    package func resizedSize(width: Int, height: Int) -> (width: Int, height: Int) {
        let short = min(width, height), long = max(width, height)
        let newLong = Int(Double(size) * Double(long) / Double(short))  // Python int() truncates
        return width <= height ? (size, newLong) : (newLong, size)
    }

    /// The network input for `image`: a `[1, 3, size, size]` tensor, RGB planes in 0…1.
    package func callAsFunction(_ image: Image) -> Tensor {
        let (w, h) = resizedSize(width: image.width, height: image.height)
        // torchvision center_crop: offsets int(round((resized − crop) / 2)), halves to even.
        // Only the crop is resampled: each output pixel of PIL's filter depends on its own taps
        // alone, so this is the same as resizing all and cropping, without the long side.
        let top = Int((Double(h - size) / 2).rounded(.toNearestOrEven))
        let left = Int((Double(w - size) / 2).rounded(.toNearestOrEven))
        let crop = image.resampledBilinearPIL(width: w, height: h, region: PixelRect(x: left, y: top, width: size, height: size))
        let plane = size * size
        let scaled = (0...255).map { Float($0) / 255 }
        var scalars = [Float](repeating: 0, count: 3 * plane)
        crop.pixels.withUnsafeBufferPointer { src in
            for i in 0..<plane {
                for c in 0..<3 { scalars[c * plane + i] = scaled[Int(src[3 * i + c])] }
            }
        }
        return Tensor(shape: [1, 3, size, size], scalars: scalars)
    }
}

extension Image {
    /// `PIL.Image.resize((width, height), Image.BILINEAR)` bit for bit (Pillow `ImagingResample`,
    /// 8-bit path): a separable triangle filter whose support grows with the reduction factor
    /// (antialiasing), coefficients normalized per output pixel and rounded to 22-bit fixed
    /// point; the horizontal pass first (rounded to 8 bits), over the source rows the vertical
    /// pass needs, then the vertical pass. A pass whose size does not change is skipped.
    ///
    /// - Parameter region: the part of the resized image to compute (all of it by default),
    ///   clipped to it; the result is that part alone.
    package func resampledBilinearPIL(width newWidth: Int, height newHeight: Int, region: PixelRect? = nil) -> Image {
        precondition(newWidth > 0 && newHeight > 0, "resize to \(newWidth)×\(newHeight)")
        let r = region ?? PixelRect(x: 0, y: 0, width: newWidth, height: newHeight)
        let x0 = min(max(r.x, 0), newWidth), x1 = min(max(r.x + r.width, x0), newWidth)
        let y0 = min(max(r.y, 0), newHeight), y1 = min(max(r.y + r.height, y0), newHeight)
        guard x0 < x1, y0 < y1 else { return Image(width: 0, height: 0, rgb: []) }
        let horizontal = newWidth != width, vertical = newHeight != height
        let xs = PILCoefficients(source: width, destination: newWidth, outputs: x0..<x1)
        let ys = PILCoefficients(source: height, destination: newHeight, outputs: y0..<y1)
        // Source rows the vertical pass reads (or the output rows themselves without one).
        let first = vertical ? ys.start[0] : y0
        let last = vertical ? zip(ys.start, ys.count).map { $0 + $1 }.max()! : y1
        let outWidth = x1 - x0, rowLength = outWidth * 3
        // The horizontal pass (or a copy of the columns) over rows first..<last.
        var rows = [UInt8](repeating: 0, count: (last - first) * rowLength)
        pixels.withUnsafeBufferPointer { src in
            for y in first..<last {
                let row = (y - first) * rowLength, srcRow = y * width * 3
                for x in x0..<x1 {
                    let o = row + 3 * (x - x0)
                    guard horizontal else {
                        for c in 0..<3 { rows[o + c] = src[srcRow + 3 * x + c] }
                        continue
                    }
                    let k = (x - x0) * xs.kernelSize, start = xs.start[x - x0]
                    var s0 = PILCoefficients.half, s1 = PILCoefficients.half, s2 = PILCoefficients.half
                    for t in 0..<xs.count[x - x0] {
                        let weight = xs.weights[k + t], p = srcRow + (start + t) * 3
                        s0 &+= Int32(src[p]) &* weight
                        s1 &+= Int32(src[p + 1]) &* weight
                        s2 &+= Int32(src[p + 2]) &* weight
                    }
                    rows[o] = PILCoefficients.clip8(s0)
                    rows[o + 1] = PILCoefficients.clip8(s1)
                    rows[o + 2] = PILCoefficients.clip8(s2)
                }
            }
        }
        guard vertical else { return Image(width: outWidth, height: y1 - y0, rgb: rows) }
        var out = [UInt8](repeating: 0, count: (y1 - y0) * rowLength)
        var sums = [Int32](repeating: 0, count: rowLength)
        for y in y0..<y1 {
            for i in 0..<rowLength { sums[i] = PILCoefficients.half }
            let k = (y - y0) * ys.kernelSize, start = ys.start[y - y0] - first
            for t in 0..<ys.count[y - y0] {
                let weight = ys.weights[k + t], row = (start + t) * rowLength
                for i in 0..<rowLength { sums[i] &+= Int32(rows[row + i]) &* weight }
            }
            for i in 0..<rowLength { out[(y - y0) * rowLength + i] = PILCoefficients.clip8(sums[i]) }
        }
        return Image(width: outWidth, height: y1 - y0, rgb: out)
    }
}

/// Pillow's `precompute_coeffs` + `normalize_coeffs_8bpc` for the bilinear (triangle) filter
/// along one axis, for the outputs `outputs` only: output `outputs.lowerBound + i` sums `count[i]`
/// source samples from `start[i]` with the fixed-point weights
/// `weights[i · kernelSize ..< i · kernelSize + count[i]]`.
struct PILCoefficients {
    static let precisionBits: Int32 = 32 - 8 - 2
    static let half: Int32 = 1 << (precisionBits - 1)

    var kernelSize = 0
    var start: [Int] = [], count: [Int] = []
    var weights: [Int32] = []

    init(source: Int, destination: Int, outputs: Range<Int>) {
        let scale = Double(source) / Double(destination)
        let filterScale = max(scale, 1)
        let support = 1.0 * filterScale  // the triangle filter's support is 1
        kernelSize = Int(support.rounded(.up)) * 2 + 1
        weights = [Int32](repeating: 0, count: outputs.count * kernelSize)
        var k = [Double](repeating: 0, count: kernelSize)
        for (n, i) in outputs.enumerated() {
            let center = (Double(i) + 0.5) * scale
            let inverse = 1 / filterScale
            // C casts truncate toward zero.
            let xmin = max(Int(center - support + 0.5), 0)
            let xmax = min(Int(center + support + 0.5), source) - xmin
            var total = 0.0
            for x in 0..<max(xmax, 0) {
                let t = abs((Double(x + xmin) - center + 0.5) * inverse)
                let w = t < 1 ? 1 - t : 0
                k[x] = w
                total += w
            }
            for x in 0..<max(xmax, 0) {
                let w = total != 0 ? k[x] / total : k[x]
                let v = w * Double(1 << Self.precisionBits)
                weights[n * kernelSize + x] = Int32(v < 0 ? v - 0.5 : v + 0.5)  // truncated, as (int)
            }
            start.append(xmin)
            count.append(max(xmax, 0))
        }
    }

    static func clip8(_ v: Int32) -> UInt8 {
        if v >= 1 << (precisionBits + 8) { return 255 }
        if v <= 0 { return 0 }
        return UInt8(truncatingIfNeeded: v >> precisionBits)
    }
}

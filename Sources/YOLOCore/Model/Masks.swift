import Foundation
import Tensor

/// Bilinear taps along one axis as PyTorch's `upsample_bilinear2d` (align_corners=False) takes
/// them: output `i` reads source samples `i0[i]` and `i1[i]` with weights `w0[i]`, `w1[i]`.
struct BilinearTaps {
    var i0: [Int32] = [], i1: [Int32] = [], w0: [Float] = [], w1: [Float] = []

    /// `scale` is source size / destination size in Float32, as PyTorch computes it.
    init(source: Int, destination: Int) {
        let scale = Float(source) / Float(destination)
        i0.reserveCapacity(destination)
        for d in 0..<destination {
            let real = max(scale * (Float(d) + 0.5) - 0.5, 0)
            let index = min(Int(real), source - 1)
            let lambda = min(max(real - Float(index), 0), 1)
            i0.append(Int32(index))
            i1.append(Int32(index + (index < source - 1 ? 1 : 0)))
            w0.append(1 - lambda)
            w1.append(lambda)
        }
    }

    /// The destination range whose taps touch source samples `lower..<upper`.
    func destinations(touching lower: Int, _ upper: Int) -> Range<Int> {
        var first = i0.count, last = -1
        for d in i0.indices where Int(i1[d]) >= lower && Int(i0[d]) < upper {
            first = min(first, d)
            last = d
        }
        return first <= last ? first..<(last + 1) : 0..<0
    }
}

/// Bilinear resampling of `source` (`sourceWidth` floats per row) at destination rows `rows`
/// and columns `columns`, PyTorch's order of operations: each source row is interpolated
/// along x, then the two rows are blended along y. Calls `body(row, values)` once per row
/// with the `columns.count` values of that row.
func resampleBilinear(_ source: UnsafePointer<Float>, sourceWidth: Int, x: BilinearTaps, y: BilinearTaps,
                      rows: Range<Int>, columns: Range<Int>, _ body: (Int, UnsafeBufferPointer<Float>) -> Void) {
    guard !rows.isEmpty, !columns.isEmpty else { return }
    let n = columns.count
    // Horizontally interpolated source rows, cached: consecutive output rows share them.
    var cache = [Float](repeating: 0, count: 2 * n), cached = [-1, -1], out = [Float](repeating: 0, count: n)
    cache.withUnsafeMutableBufferPointer { cache in
        out.withUnsafeMutableBufferPointer { out in
            func horizontal(_ sourceRow: Int, keeping other: Int) -> UnsafeMutablePointer<Float> {
                if let slot = cached.firstIndex(of: sourceRow) { return cache.baseAddress! + slot * n }
                let slot = cached[0] == other ? 1 : 0
                cached[slot] = sourceRow
                let d = cache.baseAddress! + slot * n, s = source + sourceRow * sourceWidth
                for (k, c) in columns.enumerated() {
                    d[k] = s[Int(x.i0[c])] * x.w0[c] + s[Int(x.i1[c])] * x.w1[c]
                }
                return d
            }
            for r in rows {
                let r0 = Int(y.i0[r]), r1 = Int(y.i1[r])
                let a = horizontal(r0, keeping: r1), b = horizontal(r1, keeping: r0)
                let w0 = y.w0[r], w1 = y.w1[r]
                for k in 0..<n { out[k] = a[k] * w0 + b[k] * w1 }
                body(r, UnsafeBufferPointer(out))
            }
        }
    }
}

/// Ultralytics `process_mask(protos, coefficients, boxes, shape, upsample=True)`: per instance
/// coefficients · prototypes (one GEMM), upsampled bilinearly to the input size, set where the
/// logit is above 0 (sigmoid above 0.5), cropped to the box (columns `x1 ≤ c < x2`, rows
/// `y1 ≤ r < y2`). Only the pixels inside each box are computed: the crop zeroes the others.
///
/// - protos: [1, m, mh, mw]; coefficients: n rows of m; boxes: xyxy in input pixels.
/// - Returns: one mask per instance over the `inputWidth × inputHeight` frame.
package func processMasks(protos: Tensor, coefficients: [[Float]], boxes: [SIMD4<Float>],
                          inputWidth: Int, inputHeight: Int) -> [BinaryMask] {
    let n = coefficients.count
    guard n > 0 else { return [] }
    let m = protos.shape[1], mh = protos.shape[2], mw = protos.shape[3]
    let a = Tensor(shape: [n, m], scalars: coefficients.flatMap { $0 })
    let logits = matmul(a, protos.reshaped([m, mh * mw]))  // [n, mh · mw]
    let x = BilinearTaps(source: mw, destination: inputWidth), y = BilinearTaps(source: mh, destination: inputHeight)
    func range(_ lower: Float, _ upper: Float, _ size: Int) -> Range<Int> {
        // Integer c with lower ≤ c < upper is ceil(lower) ..< ceil(upper); NaN gives nothing.
        guard lower.isFinite || upper.isFinite, !lower.isNaN, !upper.isNaN else { return 0..<0 }
        let l = Int(min(max(lower.rounded(.up), 0), Float(size))), u = Int(min(max(upper.rounded(.up), 0), Float(size)))
        return l..<max(l, u)
    }
    return logits.scalars.withUnsafeBufferPointer { all in
        (0..<n).map { i in
            let b = boxes[i]
            let columns = range(b[0], b[2], inputWidth), rows = range(b[1], b[3], inputHeight)
            var pixels = [UInt8](repeating: 0, count: columns.count * rows.count)
            resampleBilinear(all.baseAddress! + i * mh * mw, sourceWidth: mw, x: x, y: y, rows: rows, columns: columns) { r, values in
                let base = (r - rows.lowerBound) * columns.count
                for k in values.indices where values[k] > 0 { pixels[base + k] = 1 }
            }
            return BinaryMask(width: inputWidth, height: inputHeight,
                              region: PixelRect(x: columns.lowerBound, y: rows.lowerBound, width: columns.count, height: rows.count),
                              pixels: pixels)
        }
    }
}

/// Ultralytics `scale_masks` as `Annotator.masks` uses it, then `> 0.5`: the letterbox padding
/// cut off the input-resolution mask, the rest resized bilinearly to the original image.
package func scaleMask(_ mask: BinaryMask, originalWidth: Int, originalHeight: Int) -> BinaryMask {
    let inputWidth = mask.width, inputHeight = mask.height
    guard mask.area > 0 else { return BinaryMask(width: originalWidth, height: originalHeight, region: PixelRect(x: 0, y: 0, width: 0, height: 0), pixels: []) }
    // The content rectangle, as scale_masks computes it from the two shapes.
    let gain = min(Double(inputHeight) / Double(originalHeight), Double(inputWidth) / Double(originalWidth))
    let contentWidth = max(Int((Double(originalWidth) * gain).rounded(.toNearestOrEven)), 1)
    let contentHeight = max(Int((Double(originalHeight) * gain).rounded(.toNearestOrEven)), 1)
    let left = Int((Double(inputWidth - contentWidth) / 2 - 0.1).rounded(.toNearestOrEven))
    let top = Int((Double(inputHeight - contentHeight) / 2 - 0.1).rounded(.toNearestOrEven))
    // Python slicing clamps to the array.
    let x0 = min(max(left, 0), inputWidth), y0 = min(max(top, 0), inputHeight)
    let cropWidth = min(max(left + contentWidth, 0), inputWidth) - x0, cropHeight = min(max(top + contentHeight, 0), inputHeight) - y0
    guard cropWidth > 0, cropHeight > 0 else {
        return BinaryMask(width: originalWidth, height: originalHeight, region: PixelRect(x: 0, y: 0, width: 0, height: 0), pixels: [])
    }
    let x = BilinearTaps(source: cropWidth, destination: originalWidth), y = BilinearTaps(source: cropHeight, destination: originalHeight)
    // The mask's set pixels in crop coordinates; only outputs whose taps reach them can be set.
    let r = mask.region
    let sx0 = max(r.x - x0, 0), sx1 = min(r.x + r.width - x0, cropWidth)
    let sy0 = max(r.y - y0, 0), sy1 = min(r.y + r.height - y0, cropHeight)
    guard sx0 < sx1, sy0 < sy1 else {
        return BinaryMask(width: originalWidth, height: originalHeight, region: PixelRect(x: 0, y: 0, width: 0, height: 0), pixels: [])
    }
    let columns = x.destinations(touching: sx0, sx1), rows = y.destinations(touching: sy0, sy1)
    // Source samples the taps of those outputs read: one beyond the set pixels on each side.
    let ux0 = max(sx0 - 1, 0), ux1 = min(sx1 + 1, cropWidth), uy0 = max(sy0 - 1, 0), uy1 = min(sy1 + 1, cropHeight)
    let sourceWidth = ux1 - ux0
    var source = [Float](repeating: 0, count: sourceWidth * (uy1 - uy0))
    for sy in uy0..<uy1 {
        for sx in ux0..<ux1 where mask[sx + x0, sy + y0] { source[(sy - uy0) * sourceWidth + sx - ux0] = 1 }
    }
    // Taps relative to the copied window: every tap of `columns`/`rows` lies inside it.
    var xw = x, yw = y
    xw.i0 = x.i0.map { $0 - Int32(ux0) }; xw.i1 = x.i1.map { $0 - Int32(ux0) }
    yw.i0 = y.i0.map { $0 - Int32(uy0) }; yw.i1 = y.i1.map { $0 - Int32(uy0) }
    var pixels = [UInt8](repeating: 0, count: columns.count * rows.count)
    source.withUnsafeBufferPointer { s in
        resampleBilinear(s.baseAddress!, sourceWidth: sourceWidth, x: xw, y: yw, rows: rows, columns: columns) { row, values in
            let base = (row - rows.lowerBound) * columns.count
            for k in values.indices where values[k] > 0.5 { pixels[base + k] = 1 }
        }
    }
    return BinaryMask(width: originalWidth, height: originalHeight,
                      region: PixelRect(x: columns.lowerBound, y: rows.lowerBound, width: columns.count, height: rows.count),
                      pixels: pixels)
}

/// The outline of a mask as Ultralytics' `masks2segments` (strategy "all") gives it, in the
/// mask's pixel coordinates: the external contours (`cv2.findContours`, `RETR_EXTERNAL`,
/// `CHAIN_APPROX_SIMPLE`) joined by `merge_multi_segment` when there are several.
package func maskOutline(_ mask: BinaryMask) -> [SIMD2<Float>] {
    let contours = externalContours(mask)
    if contours.count <= 1 { return contours.first.map { $0.map { SIMD2(Float($0.x), Float($0.y)) } } ?? [] }
    return mergeSegments(contours.map { $0.map { SIMD2(Float($0.x), Float($0.y)) } }).flatMap { $0 }
}

/// OpenCV's `findContours(mask, RETR_EXTERNAL, CHAIN_APPROX_SIMPLE)`: Suzuki–Abe border
/// following of the outer borders of 8-connected components, no holes and nothing inside a
/// hole, each contour from its topmost-leftmost pixel, corners only (a point where the chain
/// direction changes); contours in reverse order of the raster scan, as OpenCV returns them.
package func externalContours(_ mask: BinaryMask) -> [[(x: Int, y: Int)]] {
    let r = mask.region
    guard mask.area > 0 else { return [] }
    // The region with a one-pixel zero border (OpenCV pads the image the same way).
    let w = r.width + 2, h = r.height + 2
    var image = [Int8](repeating: 0, count: w * h)
    for y in 0..<r.height {
        for x in 0..<r.width where mask.pixels[y * r.width + x] != 0 { image[(y + 1) * w + x + 1] = 1 }
    }
    // Chain codes: 0 = +x, then counter-clockwise in image coordinates (y down).
    let dx = [1, 1, 0, -1, -1, -1, 0, 1], dy = [0, -1, -1, -1, 0, 1, 1, 1]
    let delta = (0..<8).map { dy[$0] * w + dx[$0] }
    var contours = [[(x: Int, y: Int)]]()
    image.withUnsafeMutableBufferPointer { img in
        // icvFetchContour for an outer border starting at `start`.
        func trace(_ start: Int) -> [(x: Int, y: Int)] {
            let point = { (i: Int) in (x: i % w - 1 + r.x, y: i / w - 1 + r.y) }
            var s = 4
            let sEnd = 4
            var i1 = start
            repeat {
                s = (s - 1) & 7
                i1 = start + delta[s]
            } while img[i1] == 0 && s != sEnd
            if img[i1] == 0 {  // a single pixel
                img[start] = -2
                return [point(start)]
            }
            var points = [(x: Int, y: Int)]()
            var i3 = start, previous = s ^ 4
            while true {
                let end = s
                var i4 = i3
                repeat {
                    s += 1
                    i4 = i3 + delta[s & 7]
                } while img[i4] == 0
                s &= 7
                // Marked negative where the pixel to the right was passed (the border's right
                // side), positive otherwise: the scan tells inside from outside by it.
                if UInt(bitPattern: s - 1) < UInt(end) {
                    img[i3] = -2
                } else if img[i3] == 1 {
                    img[i3] = 2
                }
                if s != previous {
                    points.append(point(i3))
                    previous = s
                }
                if i4 == start && i3 == i1 { break }
                i3 = i4
                s = (s + 4) & 7
            }
            return points
        }
        for y in 1..<(h - 1) {
            var previous: Int8 = 0, lastBorder: Int8 = 0  // value at the last border passed on this row
            for x in 1..<(w - 1) {
                let i = y * w + x
                var p = img[i]
                guard p != previous else { continue }
                if previous == 0 && p == 1 && lastBorder <= 0 {
                    contours.append(trace(i))
                    p = img[i]
                }
                previous = p
                if p != 0 && p != 1 { lastBorder = p }
            }
        }
    }
    return contours.reversed()
}

/// Ultralytics `merge_multi_segment`: several closed outlines joined into one by going to the
/// closest point of the next outline and coming back the same way.
package func mergeSegments(_ input: [[SIMD2<Float>]]) -> [[SIMD2<Float>]] {
    var segments = input
    let count = segments.count
    guard count > 1, segments.allSatisfy({ !$0.isEmpty }) else { return segments }
    var indices = [[Int]](repeating: [], count: count)
    for i in 1..<count {
        // numpy argmin over the flattened distance matrix: the first minimum in row-major order.
        var best = Float.infinity, pair = (0, 0)
        for (p, a) in segments[i - 1].enumerated() {
            for (q, b) in segments[i].enumerated() {
                let d = a - b, distance = d.x * d.x + d.y * d.y
                if distance < best { best = distance; pair = (p, q) }
            }
        }
        indices[i - 1].append(pair.0)
        indices[i].append(pair.1)
    }
    func rolled(_ s: [SIMD2<Float>], by k: Int) -> [SIMD2<Float>] {
        let k = ((k % s.count) + s.count) % s.count
        return Array(s[k...] + s[..<k])
    }
    var out = [[SIMD2<Float>]]()
    for i in 0..<count {
        var idx = indices[i]
        if idx.count == 2 && idx[0] > idx[1] {
            idx = idx.map { segments[i].count - 1 - $0 }
            segments[i].reverse()
        }
        segments[i] = rolled(segments[i], by: idx[0])
        segments[i].append(segments[i][0])
        if i == 0 || i == count - 1 {
            out.append(segments[i])
        } else {
            out.append(Array(segments[i][0...(idx[1] - idx[0])]))
        }
    }
    for i in stride(from: count - 1, through: 0, by: -1) where i != 0 && i != count - 1 {
        let skip = abs(indices[i][1] - indices[i][0])
        out.append(Array(segments[i][skip...]))
    }
    return out
}

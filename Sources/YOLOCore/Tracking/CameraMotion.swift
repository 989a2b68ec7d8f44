import Foundation

/// Ultralytics' `GMC(method="sparseOptFlow")`: the camera's motion between consecutive frames
/// as a rotation, uniform scale and translation. On the gray frame at half size, up to 400
/// Shi–Tomasi corners of the previous frame are followed into the current one by pyramidal
/// Lucas–Kanade optical flow (21 × 21 window, 3 levels), and the transform is fitted to them
/// robustly (RANSAC with a 3-pixel threshold, then least squares on the inliers), as OpenCV's
/// `goodFeaturesToTrack`, `calcOpticalFlowPyrLK` and `estimateAffinePartial2D` do. The first
/// frame, and any frame with fewer than 5 points followed, gives the identity.
///
/// Written after OpenCV's algorithms, in floating point rather than its fixed point: the
/// transforms agree with OpenCV's to a few hundredths of a pixel, well inside what changes a
/// tracked box.
struct CameraMotionEstimator: Sendable {
    /// x' = a x + b y + tx, y' = c x + d y + ty.
    struct Warp: Sendable, Equatable {
        var a = 1.0, b = 0.0, tx = 0.0, c = 0.0, d = 1.0, ty = 0.0
    }

    private static let maxCorners = 400, window = 21, levels = 3, downscale = 2
    private var previous: GrayImage?
    private var previousCorners = [SIMD2<Float>]()

    /// The motion from the previous frame to `image`.
    mutating func estimate(_ image: Image) -> Warp {
        let frame = GrayImage(image).halved()
        // Too small for a corner away from the border: no motion known.
        guard frame.width >= 3, frame.height >= 3 else {
            (previous, previousCorners) = (nil, [])
            return Warp()
        }
        let corners = frame.goodFeatures(maxCorners: Self.maxCorners, quality: 0.01)
        defer { (previous, previousCorners) = (frame, corners) }
        guard let previous, previous.width == frame.width, previous.height == frame.height, !previousCorners.isEmpty else {
            return Warp()
        }
        let flow = opticalFlow(from: previous, to: frame, points: previousCorners)
        guard flow.count > 4, var warp = Self.fitSimilarity(flow) else { return Warp() }
        warp.tx *= Double(Self.downscale)
        warp.ty *= Double(Self.downscale)
        return warp
    }

    /// Pyramidal Lucas–Kanade (`calcOpticalFlowPyrLK` with its defaults): the points followed,
    /// each with where it went.
    private func opticalFlow(from a: GrayImage, to b: GrayImage, points: [SIMD2<Float>]) -> [(SIMD2<Float>, SIMD2<Float>)] {
        var pyramidA = [a.floats], pyramidB = [b.floats]
        for _ in 0..<Self.levels {
            pyramidA.append(pyramidA.last!.pyramidDown())
            pyramidB.append(pyramidB.last!.pyramidDown())
        }
        let half = Float(Self.window - 1) / 2, n = Self.window
        // Reflected margins as wide as a window, so that every window is read without a border test.
        let gradients = pyramidA.map { $0.scharr() }.map { ($0.0.padded(n + 2), $0.1.padded(n + 2)) }
        pyramidA = pyramidA.map { $0.padded(n + 2) }
        pyramidB = pyramidB.map { $0.padded(n + 2) }
        var out = [(SIMD2<Float>, SIMD2<Float>)]()
        var patch = [Float](repeating: 0, count: n * n), px = patch, py = patch, moved = patch
        points: for point in points {
            var next = point / Float(1 << Self.levels)
            for level in stride(from: Self.levels, through: 0, by: -1) {
                let I = pyramidA[level], J = pyramidB[level], (gx, gy) = gradients[level]
                let p = point / Float(1 << level) - half
                if level != Self.levels { next *= 2 }
                let ip = SIMD2<Float>(p.x.rounded(.down), p.y.rounded(.down))
                guard ip.x >= -Float(n), ip.x < Float(I.width), ip.y >= -Float(n), ip.y < Float(I.height) else {
                    if level == 0 { continue points }
                    continue
                }
                // The window of the previous image and its gradient, and their structure tensor.
                I.window(at: p, side: n, into: &patch)
                gx.window(at: p, side: n, into: &px)
                gy.window(at: p, side: n, into: &py)
                let (a11, a12, a22) = px.withUnsafeBufferPointer { x in
                    py.withUnsafeBufferPointer { y in
                        (dot(x.baseAddress!, x.baseAddress!, n * n), dot(x.baseAddress!, y.baseAddress!, n * n),
                         dot(y.baseAddress!, y.baseAddress!, n * n))
                    }
                }
                let det = a11 * a22 - a12 * a12
                let minEigen = (a22 + a11 - ((a11 - a22) * (a11 - a22) + 4 * a12 * a12).squareRoot()) / (2 * Float(n * n))
                // OpenCV's threshold 1e-4 is on its fixed-point scale, 1024 times ours.
                guard minEigen >= 1e-4 * 1024, det > 0 else {
                    if level == 0 { continue points }
                    continue
                }
                var previousDelta = SIMD2<Float>.zero
                for iteration in 0..<30 {
                    let q0 = next - half
                    guard q0.x >= -Float(n), q0.x < Float(J.width), q0.y >= -Float(n), q0.y < Float(J.height) else {
                        if level == 0 { continue points }
                        break
                    }
                    J.window(at: q0, side: n, into: &moved)
                    for k in 0..<n * n { moved[k] -= patch[k] }
                    let (b1, b2) = moved.withUnsafeBufferPointer { d in
                        px.withUnsafeBufferPointer { x in
                            py.withUnsafeBufferPointer { y in (dot(d.baseAddress!, x.baseAddress!, n * n), dot(d.baseAddress!, y.baseAddress!, n * n)) }
                        }
                    }
                    let delta = SIMD2((a12 * b2 - a22 * b1) / det, (a12 * b1 - a11 * b2) / det)
                    next += delta
                    if (delta * delta).sum() <= 1e-4 { break }
                    if iteration > 0, abs(delta.x + previousDelta.x) < 0.01, abs(delta.y + previousDelta.y) < 0.01 {
                        next -= delta / 2
                        break
                    }
                    previousDelta = delta
                }
            }
            out.append((point, next))
        }
        return out
    }

    /// `estimateAffinePartial2D(…, RANSAC)`: the similarity with most points within 3 pixels,
    /// from random pairs (2000 draws at most, fewer as the inlier share grows, for 99 %
    /// confidence), refitted by least squares to those points; nil when none is found.
    static func fitSimilarity(_ pairs: [(SIMD2<Float>, SIMD2<Float>)]) -> Warp? {
        let from = pairs.map { SIMD2<Double>($0.0) }, to = pairs.map { SIMD2<Double>($0.1) }
        var rng = UInt64(0x2545_F491_4F6C_DD1D), best = [Int](), iterations = 2000, k = 0
        func random(_ n: Int) -> Int {
            rng = rng &* 6364136223846793005 &+ 1442695040888963407
            return Int((rng >> 33) % UInt64(n))
        }
        while k < iterations {
            k += 1
            let i = random(pairs.count), j = random(pairs.count)
            guard i != j, let model = leastSquares([i, j], from, to) else { continue }
            let inliers = pairs.indices.filter { m in
                let p = from[m], e = SIMD2(model.a * p.x + model.b * p.y + model.tx, model.c * p.x + model.d * p.y + model.ty) - to[m]
                return (e * e).sum() <= 9
            }
            if inliers.count > best.count {
                best = inliers
                let share = Double(inliers.count) / Double(pairs.count)
                let needed = log(1 - 0.99) / log(max(1 - share * share, .ulpOfOne))
                iterations = min(iterations, max(Int(needed.rounded(.up)), 1))
            }
        }
        return best.count >= 2 ? leastSquares(best, from, to) : nil
    }

    /// The similarity (a, −c; c, a) + t nearest `to` from `from` over `indices`, in closed form.
    private static func leastSquares(_ indices: [Int], _ from: [SIMD2<Double>], _ to: [SIMD2<Double>]) -> Warp? {
        let n = Double(indices.count)
        var mf = SIMD2<Double>.zero, mt = SIMD2<Double>.zero
        for i in indices { (mf, mt) = (mf + from[i], mt + to[i]) }
        (mf, mt) = (mf / n, mt / n)
        var sxx = 0.0, sa = 0.0, sb = 0.0
        for i in indices {
            let p = from[i] - mf, q = to[i] - mt
            sxx += (p * p).sum()
            sa += p.x * q.x + p.y * q.y
            sb += p.x * q.y - p.y * q.x
        }
        guard sxx > 0 else { return nil }
        let a = sa / sxx, c = sb / sxx
        return Warp(a: a, b: -c, tx: mt.x - (a * mf.x - c * mf.y), c: c, d: a, ty: mt.y - (c * mf.x + a * mf.y))
    }
}

/// An 8-bit gray image, OpenCV's `cvtColor(…, COLOR_BGR2GRAY)` of an RGB image.
private struct GrayImage: Sendable {
    let width: Int, height: Int
    var pixels: [UInt8]

    init(width: Int, height: Int, pixels: [UInt8]) { (self.width, self.height, self.pixels) = (width, height, pixels) }

    init(_ image: Image) {
        width = image.width
        height = image.height
        pixels = [UInt8](unsafeUninitializedCapacity: image.width * image.height) { gray, count in
            image.pixels.withUnsafeBufferPointer { rgb in
                // OpenCV's fixed-point weights: 0.299, 0.587, 0.114 in units of 2⁻¹⁵.
                for i in 0..<image.width * image.height {
                    let r = Int(rgb[3 * i]), g = Int(rgb[3 * i + 1]), b = Int(rgb[3 * i + 2])
                    gray[i] = UInt8((r * 9798 + g * 19235 + b * 3735 + 16384) >> 15)
                }
            }
            count = image.width * image.height
        }
    }

    /// `cv2.resize` to half size (⌊w/2⌋ × ⌊h/2⌋), which for exactly half is OpenCV's area
    /// average of each 2 × 2 block, rounded.
    func halved() -> GrayImage {
        let w = width / 2, h = height / 2
        var out = [UInt8](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let s = 2 * y * width + 2 * x
                out[y * w + x] = UInt8((Int(pixels[s]) + Int(pixels[s + 1]) + Int(pixels[s + width]) + Int(pixels[s + width + 1]) + 2) >> 2)
            }
        }
        return GrayImage(width: w, height: h, pixels: out)
    }

    var floats: FloatImage { FloatImage(width: width, height: height, values: pixels.map(Float.init)) }

    /// `goodFeaturesToTrack` with `minDistance` 0 and `blockSize` 3: the pixels (not on the
    /// border) whose smaller structure-tensor eigenvalue is a 3 × 3 local maximum above
    /// `quality` × the largest, strongest first (ties: later pixel first), at most `maxCorners`.
    func goodFeatures(maxCorners: Int, quality: Float) -> [SIMD2<Float>] {
        guard width >= 3, height >= 3 else { return [] }
        let (dx, dy) = floats.sobel()
        // The 3 × 3 sums of the gradient products (reflected at the border), scaled as OpenCV.
        let scale: Float = 1 / (4 * 3 * 255)
        var xx = [Float](repeating: 0, count: width * height), xy = xx, yy = xx
        for i in xx.indices {
            let gx = dx.values[i] * scale, gy = dy.values[i] * scale
            (xx[i], xy[i], yy[i]) = (gx * gx, gx * gy, gy * gy)
        }
        var eigen = [Float](repeating: 0, count: width * height)
        for y in 0..<height {
            for x in 0..<width {
                var a: Float = 0, b: Float = 0, c: Float = 0
                for v in -1...1 {
                    for u in -1...1 {
                        let k = reflect(y + v, height) * width + reflect(x + u, width)
                        (a, b, c) = (a + xx[k], b + xy[k], c + yy[k])
                    }
                }
                a *= 0.5
                c *= 0.5
                eigen[y * width + x] = (a + c) - ((a - c) * (a - c) + b * b).squareRoot()
            }
        }
        let threshold = (eigen.max() ?? 0) * quality
        for i in eigen.indices where eigen[i] <= threshold { eigen[i] = 0 }
        var corners = [(value: Float, offset: Int)]()
        for y in 1..<height - 1 {
            for x in 1..<width - 1 {
                let value = eigen[y * width + x]
                guard value != 0 else { continue }
                var isMax = true
                for v in -1...1 where isMax { for u in -1...1 where eigen[(y + v) * width + x + u] > value { isMax = false } }
                if isMax { corners.append((value, y * width + x)) }
            }
        }
        corners.sort { $0.value != $1.value ? $0.value > $1.value : $0.offset > $1.offset }
        return corners.prefix(maxCorners).map { SIMD2(Float($0.offset % width), Float($0.offset / width)) }
    }
}

/// A float image for the optical flow, sampled bilinearly with reflected borders.
private struct FloatImage: Sendable {
    let width: Int, height: Int
    /// Rows of `stride` values, the image `margin` values in from the top and the left.
    var values: [Float]
    var margin = 0
    var stride: Int { width + 2 * margin }

    init(width: Int, height: Int, values: [Float]) { (self.width, self.height, self.values) = (width, height, values) }

    /// The image with `margin` reflected pixels around it.
    func padded(_ margin: Int) -> FloatImage {
        var out = FloatImage(width: width, height: height, values: [])
        out.margin = margin
        out.values = [Float](unsafeUninitializedCapacity: out.stride * (height + 2 * margin)) { v, count in
            for y in -margin..<height + margin {
                for x in -margin..<width + margin { v[(y + margin) * out.stride + x + margin] = at(x, y) }
            }
            count = out.stride * (height + 2 * margin)
        }
        return out
    }

    @inline(__always) func at(_ x: Int, _ y: Int) -> Float {
        values[(reflect(y, height) + margin) * stride + reflect(x, width) + margin]
    }

    /// The `side` × `side` window whose top-left sample is at `p`, bilinearly: every sample has
    /// the same fractional offset, so the weights are computed once.
    func window(at p: SIMD2<Float>, side: Int, into out: inout [Float]) {
        let x0 = Int(p.x.rounded(.down)), y0 = Int(p.y.rounded(.down))
        let fx = p.x - Float(x0), fy = p.y - Float(y0)
        let w00 = (1 - fx) * (1 - fy), w01 = fx * (1 - fy), w10 = (1 - fx) * fy, w11 = fx * fy
        let inside = x0 + margin >= 0 && y0 + margin >= 0 && x0 + side < width + margin && y0 + side < height + margin
        values.withUnsafeBufferPointer { v in
            out.withUnsafeMutableBufferPointer { o in
                for y in 0..<side {
                    if inside {
                        let row = v.baseAddress! + (y0 + y + margin) * stride + x0 + margin, next = row + stride
                        let line = o.baseAddress! + y * side
                        for x in 0..<side { line[x] = w00 * row[x] + w01 * row[x + 1] + w10 * next[x] + w11 * next[x + 1] }
                        continue
                    }
                    for x in 0..<side {
                        o[y * side + x] = w00 * at(x0 + x, y0 + y) + w01 * at(x0 + x + 1, y0 + y)
                            + w10 * at(x0 + x, y0 + y + 1) + w11 * at(x0 + x + 1, y0 + y + 1)
                    }
                }
            }
        }
    }

    /// `pyrDown`: the 5 × 5 binomial blur sampled at even pixels, ⌈w/2⌉ × ⌈h/2⌉, rounded to
    /// whole values as OpenCV's 8-bit pyramid (the sums are whole numbers, exact in Float).
    func pyramidDown() -> FloatImage {
        let w = (width + 1) / 2, h = (height + 1) / 2, p = padded(2), s = p.stride
        // Rows first, at the even columns, for every padded row; then the columns.
        var rows = [Float](repeating: 0, count: w * (height + 4))
        for y in 0..<height + 4 {
            for x in 0..<w {
                let r = y * s + 2 * x
                rows[y * w + x] = p.values[r] + 4 * p.values[r + 1] + 6 * p.values[r + 2] + 4 * p.values[r + 3] + p.values[r + 4]
            }
        }
        var out = [Float](repeating: 0, count: w * h)
        for y in 0..<h {
            for x in 0..<w {
                let r = 2 * y * w + x
                let sum = rows[r] + 4 * rows[r + w] + 6 * rows[r + 2 * w] + 4 * rows[r + 3 * w] + rows[r + 4 * w]
                out[y * w + x] = ((sum + 128) / 256).rounded(.down)
            }
        }
        return FloatImage(width: w, height: h, values: out)
    }

    /// 3 × 3 Sobel derivatives in x and y.
    func sobel() -> (FloatImage, FloatImage) { derivatives(side: 1, centre: 2) }

    /// 3 × 3 Scharr derivatives in x and y, divided by 32 to be per pixel, as the optical flow
    /// takes them.
    func scharr() -> (FloatImage, FloatImage) { derivatives(side: 3 / 32, centre: 10 / 32) }

    private func derivatives(side: Float, centre: Float) -> (FloatImage, FloatImage) {
        let p = padded(1), s = p.stride, v = p.values
        var gx = [Float](repeating: 0, count: width * height), gy = gx
        for y in 0..<height {
            for x in 0..<width {
                let c = (y + 1) * s + x + 1
                gx[y * width + x] = side * (v[c - s + 1] - v[c - s - 1] + v[c + s + 1] - v[c + s - 1]) + centre * (v[c + 1] - v[c - 1])
                gy[y * width + x] = side * (v[c + s - 1] - v[c - s - 1] + v[c + s + 1] - v[c - s + 1]) + centre * (v[c + s] - v[c - s])
            }
        }
        return (FloatImage(width: width, height: height, values: gx), FloatImage(width: width, height: height, values: gy))
    }
}

/// Σ a[k] · b[k] over `count` values, eight lanes at a time.
@inline(__always) private func dot(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, _ count: Int) -> Float {
    var lanes = SIMD8<Float>.zero, k = 0
    while k + 8 <= count {
        lanes += UnsafeRawPointer(a + k).loadUnaligned(as: SIMD8<Float>.self) * UnsafeRawPointer(b + k).loadUnaligned(as: SIMD8<Float>.self)
        k += 8
    }
    var sum = lanes.sum()
    while k < count {
        sum += a[k] * b[k]
        k += 1
    }
    return sum
}

/// `i` reflected into 0..<n without repeating the edge (OpenCV's BORDER_REFLECT_101).
@inline(__always) private func reflect(_ i: Int, _ n: Int) -> Int {
    if i >= 0 && i < n { return i }
    guard n > 1 else { return 0 }
    var i = i
    while i < 0 || i >= n { i = i < 0 ? -i : 2 * (n - 1) - i }
    return i
}

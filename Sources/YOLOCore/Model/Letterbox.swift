import Tensor

/// Ultralytics' `LetterBox` as `predict` applies it (8.4.190 `data/augment.py`,
/// `engine/predictor.py`): scale so the image fits `height × width` (up or down), resize with
/// OpenCV's bilinear filter, centre it on a field of value 114, then RGB / 255.
package struct Letterbox: Sendable, Equatable {
    /// The field the image is fitted into; multiples of `stride`, as Ultralytics' `check_imgsz`
    /// makes them.
    package var height: Int, width: Int
    package var stride: Int
    /// `true`: the minimal rectangle, each side padded only up to a multiple of `stride`
    /// (what `predict` does for PyTorch models); `false`: padded to `imgsz × imgsz`.
    package var auto: Bool

    package init(imgsz: Int = 640, stride: Int = 32, auto: Bool = true) {
        self.init(height: imgsz, width: imgsz, stride: stride, auto: auto)
    }

    package init(height: Int, width: Int, stride: Int = 32, auto: Bool = true) {
        (self.height, self.width) = (height, width)
        self.stride = stride
        self.auto = auto
    }

    /// The geometry for an image of `width × height`, as `LetterBox.get_params` computes it.
    package func transform(width: Int, height: Int) -> LetterboxTransform {
        Letterbox.transform(width: width, height: height, targetWidth: self.width, targetHeight: self.height, scaleUp: true,
                            stride: auto ? stride : nil)
    }

    /// `LetterBox.get_params` for a `targetWidth × targetHeight` field: `scaleUp` false only
    /// shrinks (validation's `scaleup=False`); `stride` pads each side only up to a multiple of it
    /// (the minimal rectangle), nil pads to the whole field.
    package static func transform(width: Int, height: Int, targetWidth: Int, targetHeight: Int, scaleUp: Bool,
                                  stride: Int?) -> LetterboxTransform {
        var r = min(Double(targetHeight) / Double(height), Double(targetWidth) / Double(width))
        if !scaleUp { r = min(r, 1) }
        // Python's round() rounds halves to even.
        let newWidth = max(Int((Double(width) * r).rounded(.toNearestOrEven)), 1)
        let newHeight = max(Int((Double(height) * r).rounded(.toNearestOrEven)), 1)
        var dw = targetWidth - newWidth, dh = targetHeight - newHeight
        if let stride {
            dw = (dw % stride + stride) % stride
            dh = (dh % stride + stride) % stride
        }
        // Odd padding puts the extra pixel right and bottom.
        let left = Int((Double(dw) / 2 - 0.1).rounded(.toNearestOrEven))
        let top = Int((Double(dh) / 2 - 0.1).rounded(.toNearestOrEven))
        return LetterboxTransform(
            originalWidth: width, originalHeight: height, resizedWidth: newWidth, resizedHeight: newHeight,
            inputWidth: newWidth + dw, inputHeight: newHeight + dh, left: left, top: top)
    }

    /// The network input for `image`: a `[1, 3, H, W]` tensor, RGB planes in 0…1, with
    /// `H = transform.inputHeight`, `W = transform.inputWidth`.
    package func callAsFunction(_ image: Image) -> (tensor: Tensor, transform: LetterboxTransform) {
        let t = transform(width: image.width, height: image.height)
        return (t.input(image), t)
    }
}

/// Where a letterboxed image sits in the network input, to map results back to the original
/// image as Ultralytics' `scale_boxes` / `scale_coords` do: (input − pad) / gain, per axis.
package struct LetterboxTransform: Sendable, Equatable {
    package let originalWidth, originalHeight: Int
    /// The image's size inside the input.
    package let resizedWidth, resizedHeight: Int
    package let inputWidth, inputHeight: Int
    /// Padding before the image, left and top.
    package let left, top: Int

    /// The network input: `image` (of the original size) resized, centred on a field of 114,
    /// as a `[1, 3, inputHeight, inputWidth]` tensor, RGB planes in 0…1.
    package func input(_ image: Image) -> Tensor {
        let resized = image.resized(width: resizedWidth, height: resizedHeight)
        let plane = inputWidth * inputHeight
        // x / 255 in Float32, as PyTorch's div_(255) computes it (not x · (1/255)).
        let scaled = (0...255).map { Float($0) / 255 }
        var scalars = [Float](repeating: scaled[114], count: 3 * plane)
        scalars.withUnsafeMutableBufferPointer { out in
            resized.pixels.withUnsafeBufferPointer { src in
                for y in 0..<resizedHeight {
                    let row = (top + y) * inputWidth + left
                    for x in 0..<resizedWidth {
                        let s = (y * resizedWidth + x) * 3
                        out[row + x] = scaled[Int(src[s])]
                        out[plane + row + x] = scaled[Int(src[s + 1])]
                        out[2 * plane + row + x] = scaled[Int(src[s + 2])]
                    }
                }
            }
        }
        return Tensor(shape: [1, 3, inputHeight, inputWidth], scalars: scalars)
    }

    // Ultralytics' gain is the rounded size over the original one, per axis; Float32 like the
    // tensors it divides.
    private var gainX: Float { Float(Double(resizedWidth) / Double(originalWidth)) }
    private var gainY: Float { Float(Double(resizedHeight) / Double(originalHeight)) }

    /// An `x1, y1, x2, y2` box in input pixels → original-image pixels, clipped to the image.
    package func scaleBox(_ xyxy: SIMD4<Float>) -> SIMD4<Float> {
        let pad = SIMD4(Float(left), Float(top), Float(left), Float(top))
        let gain = SIMD4(gainX, gainY, gainX, gainY)
        let size = SIMD4(Float(originalWidth), Float(originalHeight), Float(originalWidth), Float(originalHeight))
        return ((xyxy - pad) / gain).clamped(lowerBound: .zero, upperBound: size)
    }

    /// A `cx, cy, w, h` box (the rotated boxes of OBB models) → original-image pixels, not
    /// clipped, as `scale_boxes(..., xywh=True)`.
    package func scaleBox(xywh: SIMD4<Float>) -> SIMD4<Float> {
        (xywh - SIMD4(Float(left), Float(top), 0, 0)) / SIMD4(gainX, gainY, gainX, gainY)
    }

    /// A point (keypoint) → original-image pixels, clipped to the image, as `scale_coords`.
    package func scalePoint(_ xy: SIMD2<Float>) -> SIMD2<Float> {
        ((xy - SIMD2(Float(left), Float(top))) / SIMD2(gainX, gainY))
            .clamped(lowerBound: .zero, upperBound: SIMD2(Float(originalWidth), Float(originalHeight)))
    }
}

extension Image {
    /// `cv2.resize(image, (width, height), interpolation=cv2.INTER_LINEAR)` bit for bit.
    ///
    /// OpenCV's 8-bit bilinear filter is fixed-point: Float32 weights × 2048, rounded; a
    /// horizontal pass into Int32 rows, then a vertical one whose `(b · (row >> 4)) >> 16`
    /// terms and `(sum + 2) >> 2` are those of its SIMD code (also used for leftover pixels).
    /// An exact halving of both sides switches to INTER_AREA, a 2×2 mean, as OpenCV does.
    package func resized(width newWidth: Int, height newHeight: Int) -> Image {
        precondition(newWidth > 0 && newHeight > 0, "resize to \(newWidth)×\(newHeight)")
        if newWidth == width && newHeight == height { return self }
        if width == 2 * newWidth && height == 2 * newHeight { return halved() }
        let xTaps = LinearTaps(source: width, destination: newWidth, horizontal: true)
        let yTaps = LinearTaps(source: height, destination: newHeight, horizontal: false)
        let rowLength = newWidth * 3
        var out = [UInt8](repeating: 0, count: newHeight * rowLength)
        // The horizontally resized source rows the current output row blends, two slots.
        var rows = [Int32](repeating: 0, count: 2 * rowLength)
        var rowInSlot = [-1, -1]
        pixels.withUnsafeBufferPointer { src in
            rows.withUnsafeMutableBufferPointer { rows in
                out.withUnsafeMutableBufferPointer { out in
                    // The slot holding horizontally resized source row `y`, filling it when needed
                    // without evicting `keep`.
                    func slot(for y: Int, keeping keep: Int) -> Int {
                        if let s = rowInSlot.firstIndex(of: y) { return s }
                        let s = rowInSlot[0] == keep ? 1 : 0
                        rowInSlot[s] = y
                        let row = src.baseAddress! + y * width * 3
                        let d = rows.baseAddress! + s * rowLength
                        for x in 0..<newWidth {
                            let i0 = xTaps.first[x] * 3, i1 = xTaps.second[x] * 3
                            let w0 = xTaps.w0[x], w1 = xTaps.w1[x]
                            for c in 0..<3 {
                                d[3 * x + c] = Int32(row[i0 + c]) &* w0 &+ Int32(row[i1 + c]) &* w1
                            }
                        }
                        return s
                    }
                    for y in 0..<newHeight {
                        let y0 = yTaps.first[y], y1 = yTaps.second[y]
                        let s0 = slot(for: y0, keeping: y1), s1 = slot(for: y1, keeping: y0)
                        let r0 = rows.baseAddress! + s0 * rowLength, r1 = rows.baseAddress! + s1 * rowLength
                        let b0 = yTaps.w0[y], b1 = yTaps.w1[y]
                        let o = out.baseAddress! + y * rowLength
                        for i in 0..<rowLength {
                            let v = (b0 &* (r0[i] &>> 4)) &>> 16 &+ (b1 &* (r1[i] &>> 4)) &>> 16
                            o[i] = UInt8(truncatingIfNeeded: (v &+ 2) &>> 2)
                        }
                    }
                }
            }
        }
        return Image(width: newWidth, height: newHeight, rgb: out)
    }

    /// OpenCV's INTER_AREA for an exact 2× reduction: the rounded mean of each 2×2 block.
    private func halved() -> Image {
        let w = width / 2, h = height / 2
        var out = [UInt8](repeating: 0, count: w * h * 3)
        for y in 0..<h {
            let top = 2 * y * width * 3, bottom = top + width * 3
            for x in 0..<w {
                for c in 0..<3 {
                    let i = 6 * x + c
                    let sum = Int(pixels[top + i]) + Int(pixels[top + i + 3]) + Int(pixels[bottom + i]) + Int(pixels[bottom + i + 3])
                    out[(y * w + x) * 3 + c] = UInt8((sum + 2) >> 2)
                }
            }
        }
        return Image(width: w, height: h, rgb: out)
    }
}

/// OpenCV's bilinear taps along one axis: output `i` blends source samples `first[i]` and
/// `second[i]` with weights `w0[i]`, `w1[i]` (Float32 fractions × 2048, rounded half to even).
struct LinearTaps {
    var first: [Int] = [], second: [Int] = []
    var w0: [Int32] = [], w1: [Int32] = []

    init(source: Int, destination: Int, horizontal: Bool) {
        // OpenCV's scale is 1 / (destination / source), which can differ from
        // source / destination in the last bit.
        let scale = 1 / (Double(destination) / Double(source))
        for i in 0..<destination {
            var f = Float((Double(i) + 0.5) * scale - 0.5)
            var s = Int(f.rounded(.down))
            f -= Float(s)
            // Beyond the edges OpenCV's horizontal pass takes the edge sample with weight 1,
            // while its vertical pass keeps the fraction and clamps both rows; the fixed-point
            // rounding tells the two apart.
            if horizontal {
                if s < 0 { s = 0; f = 0 }
                if s >= source - 1 { s = source - 1; f = 0 }
            }
            first.append(min(max(s, 0), source - 1))
            second.append(min(max(s + 1, 0), source - 1))
            w0.append(Int32(((1 - f) * 2048).rounded(.toNearestOrEven)))
            w1.append(Int32((f * 2048).rounded(.toNearestOrEven)))
        }
    }
}

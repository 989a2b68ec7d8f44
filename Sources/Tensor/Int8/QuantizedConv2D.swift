import CTargetFeatures
import _Builtin_intrinsics.intel

/// Convolution weights [Cout, Cin, kH, kW] quantized for `quantizedConv2d`: symmetric per output
/// channel, q = round(w / scale) in −63…63 (seven bits, so `int8GEMM`'s pairs of u8 · s8
/// products cannot overflow an Int16), packed as `int8GEMM` panels of 4 output channels:
/// [⌈Cout/4⌉][steps][4 channels][4 bytes]. Step `tap · quads + quad` holds input channels
/// 4 · quad ..< 4 · quad + 4 (zeros past Cin) of kernel tap `tap` (ky · kW + kx).
public struct QuantizedConvWeights: Sendable {
    /// [Cout, Cin, kH, kW].
    public let shape: [Int]
    package let values: [UInt32]
    /// Per output channel: w ≈ q · scale.
    package let scales: [Float]
    /// Per output channel: Σ q.
    package let sums: [Int32]
    /// The largest |q|.
    static let limit: Float = 63

    /// Weights of one group (`quantizedConv2d` runs ungrouped convolutions only).
    public init(_ weight: Tensor) {
        precondition(weight.rank == 4, "QuantizedConvWeights: weight \(weight.shape)")
        shape = weight.shape
        let (cout, cin, taps) = (shape[0], shape[1], shape[2] * shape[3])
        let quads = (cin + 3) / 4, steps = taps * quads, k = cin * taps
        var values = [UInt32](repeating: 0, count: (cout + 3) / 4 * steps * 4)
        var scales = [Float](repeating: 1, count: cout), sums = [Int32](repeating: 0, count: cout)
        for o in 0..<cout {
            let row = weight.scalars[(o * k)..<((o + 1) * k)]
            // Non-finite weights (a corrupt file) quantize to 0 rather than trap.
            let largest = row.reduce(0) { $1.isFinite ? max($0, abs($1)) : $0 }
            if largest > 0 { scales[o] = largest / Self.limit }
            for c in 0..<cin {
                for tap in 0..<taps {
                    let w = row[row.startIndex + c * taps + tap]
                    let q = w.isFinite ? Int32(max(-Self.limit, min(Self.limit, (w / scales[o]).rounded()))) : 0
                    sums[o] += q
                    let step = tap * quads + c / 4
                    values[(o / 4 * steps + step) * 4 + o % 4] |= UInt32(UInt8(truncatingIfNeeded: q)) << (8 * (c % 4))
                }
            }
        }
        (self.values, self.scales, self.sums) = (values, scales, sums)
    }

    var quads: Int { (shape[1] + 3) / 4 }
    var steps: Int { shape[2] * shape[3] * quads }
}

/// How `quantizedConv2d` maps an input's floats to bytes: q = clamp(round(x / scale) + zero, 0, 255),
/// from the input's range widened to hold 0, so that 0 (the padding) is exact: asymmetric, one
/// scale per tensor, from the range measured at run time or known (`Map.range`).
package struct ActivationQuantization: Equatable {
    package let scale: Float, zero: Int32

    /// A range that is not finite (an input holding NaN or infinity) gets scale 1 and zero 0:
    /// the outputs are meaningless, as in fp32, but nothing traps.
    package init(minimum: Float, maximum: Float) {
        let (lo, hi) = (min(minimum, 0), max(maximum, 0))
        guard (hi - lo).isFinite else {
            (scale, zero) = (1, 0)
            return
        }
        scale = hi > lo ? (hi - lo) / 255 : 1
        zero = min(max(Int32((-lo / scale).rounded()), 0), 255)
    }

    /// 8 pixels of 4 channels (`c.0` … `c.3`) as bytes, channel c's in bits 8c … 8c + 7 of each
    /// pixel's UInt32: x · inverse rounded to nearest even (as the CPU rounds), + zero, clamped to
    /// 0 … 255 (`quantizePixels`).
    @inline(__always)
    func pack(_ c: (Vec8, Vec8, Vec8, Vec8), inverse: Float) -> SIMD8<UInt32> {
        let bytes = quantizePixels(c.0, c.1, c.2, c.3, inverse, Int16(truncatingIfNeeded: zero))
        return unsafeBitCast(bytes, to: SIMD8<UInt32>.self)
    }
}

extension Reference {
    /// `ActivationQuantization`'s byte for x, one at a time.
    package static func quantize(_ x: Float, _ q: ActivationQuantization) -> UInt8 {
        UInt8(min(max(Int32((x * (1 / q.scale)).rounded(.toNearestOrEven)) + q.zero, 0), 255))
    }
}

/// A convolution's input quantized and laid out for `int8GEMM`: for each quad of input
/// channels (4 bytes a pixel, zeros past the last channel), one plane per stride phase
/// (`PhasePlanes`' layout, padding at the zero point), each `height` × `width` UInt32s and
/// `slack` more for the GEMM's last strip. Output pixel (oy, ox) reads tap (ky, kx) at grid
/// column oy · width + ox shifted by the tap's row offset, so the GEMM's columns are the grid's
/// (`width` − Wo junk columns a row).
struct QuantizedPlanes {
    let width: Int, height: Int
    let quads: Int
    let p: Conv2DParameters
    /// UInt32s a plane, with the slack.
    let planeSize: Int
    static let slack = 16

    init(channels: Int, ho: Int, wo: Int, _ p: Conv2DParameters) {
        width = wo + (p.kernelW - 1) / p.strideW
        height = ho + (p.kernelH - 1) / p.strideH + 1
        quads = (channels + 3) / 4
        self.p = p
        planeSize = height * width + Self.slack
    }

    var quadSize: Int { p.strideH * p.strideW * planeSize }
    var count: Int { quads * quadSize }

    /// The rows (or columns) of a phase plane that hold input pixels: y with 0 ≤ y · stride +
    /// phase − pad < count, below `limit`.
    static func covered(pad: Int, phase: Int, stride: Int, count: Int, limit: Int) -> Range<Int> {
        let first = (pad - phase + stride - 1) / stride, last = count - 1 + pad - phase
        let end = last < 0 ? 0 : min(limit, last / stride + 1)
        return min(first, end)..<end
    }

    /// Where each `QuantizedConvWeights` step's row of B starts.
    func rowOffsets(into rows: UnsafeMutablePointer<Int>) {
        for ky in 0..<p.kernelH {
            for kx in 0..<p.kernelW {
                let plane = (ky % p.strideH * p.strideW + kx % p.strideW) * planeSize
                let shift = ky / p.strideH * width + kx / p.strideW, tap = ky * p.kernelW + kx
                for q in 0..<quads { rows[tap * quads + q] = q * quadSize + plane + shift }
            }
        }
    }

    /// Input rows `inputRows` of quad `q` of `x` [C, H, W] quantized into `planes`, and with the
    /// first rows, what the input does not cover (at the zero point): the rows and columns of
    /// padding, and the rows and slack past the input.
    func fill(quad q: Int, rows inputRows: Range<Int>, from x: Map, _ quantization: ActivationQuantization,
              into planes: UnsafeMutablePointer<UInt32>) {
        let base = planes + q * quadSize, (h, w) = (x.height, x.width)
        let zero = UInt32(quantization.zero) &* 0x0101_0101
        for py in 0..<p.strideH where inputRows.lowerBound == 0 {
            for px in 0..<p.strideW {
                let plane = base + (py * p.strideW + px) * planeSize
                let rows = Self.covered(pad: p.padH, phase: py, stride: p.strideH, count: h, limit: height)
                let columns = Self.covered(pad: p.padW, phase: px, stride: p.strideW, count: w, limit: width)
                plane.initialize(repeating: zero, count: rows.lowerBound * width)
                (plane + rows.upperBound * width).initialize(repeating: zero, count: planeSize - rows.upperBound * width)
                for y in rows {
                    (plane + y * width).initialize(repeating: zero, count: columns.lowerBound)
                    (plane + y * width + columns.upperBound).initialize(repeating: zero, count: width - columns.upperBound)
                }
            }
        }
        let inverse = 1 / quantization.scale
        // Channels past the last read as zeros, which quantize to the zero point.
        let hw = h * w, present = min(4, x.channels - 4 * q), first = x.base + 4 * q * hw
        for iy in inputRows {
            let (py, y) = ((iy + p.padH) % p.strideH, (iy + p.padH) / p.strideH)
            guard y < height else { break }
            let row = first + iy * w, out = base + py * p.strideW * planeSize + y * width
            var ix = 0
            // Whole groups of 8 pixels, stored whole (stride 1) or split by phase.
            if p.strideW <= 2 {
                // Groups start up to `end` (whole in the input, their plane columns below `width`),
                // found once a row: tested per group, it is a division by the stride each time.
                let end = min(w, p.strideW * width - p.padW) - 8
                let phase = out + p.padW % 2 * planeSize, other = out + (1 - p.padW % 2) * planeSize
                while ix <= end {
                    let c = row + ix
                    @inline(__always) func load(_ k: Int) -> Vec8 { k < present ? (c + k * hw).vector(0) : Vec8() }
                    let pixels = quantization.pack((load(0), load(1), load(2), load(3)), inverse: inverse)
                    if p.strideW == 1 {
                        UnsafeMutableRawPointer(out + ix + p.padW).storeBytes(of: pixels, as: SIMD8<UInt32>.self)
                    } else {
                        // Even columns to one phase, odd to the other (ix is even).
                        UnsafeMutableRawPointer(phase + (ix + p.padW) / 2).storeBytes(of: pixels.evenHalf, as: SIMD4<UInt32>.self)
                        UnsafeMutableRawPointer(other + (ix + p.padW + 1) / 2).storeBytes(of: pixels.oddHalf, as: SIMD4<UInt32>.self)
                    }
                    ix += 8
                }
            }
            while ix < w {
                let n = min(8, w - ix)
                func load(_ c: Int) -> Vec8 {
                    c < present ? loadFirst(row + c * hw + ix, Int32(n)) : Vec8()
                }
                let pixels = quantization.pack((load(0), load(1), load(2), load(3)), inverse: inverse)
                for i in 0..<n {
                    let column = ix + p.padW + i
                    let (px, xx) = p.strideW == 1 ? (0, column)
                        : p.strideW == 2 ? (column & 1, column >> 1) : (column % p.strideW, column / p.strideW)
                    if xx < width { out[px * planeSize + xx] = pixels[i] }
                }
                ix += 8
            }
        }
    }
}

/// y = activation(conv(x, weight) + bias) + residual for one image, in 8-bit integers: x [Cin, H, W]
/// quantized per tensor (`ActivationQuantization`, from its range), the weights per output
/// channel (`QuantizedConvWeights`), their products summed exactly in Int32 (`int8GEMM`), then
/// scaled back to floats with the bias and activation; residual and y [Cout, Ho, Wo] in floats.
/// Ungrouped convolutions only. Returns y's range, measured as y is stored: given to the next
/// convolution as its input's `Map.range`, it spares that one the pass over its input.
///
/// Threads find the input's range a range of it each (unless `x.range` has it), quantize a
/// block of rows of a quad of channels at a time, then take ranges of the grid's columns.
@discardableResult
package func quantizedConv2d(_ x: Map, weight: QuantizedConvWeights, bias: [Float], _ p: Conv2DParameters,
                             activation: Activation = .none, residual: Map? = nil, into y: Map, scratch: Scratch) -> ValueRange {
    let cout = weight.shape[0]
    precondition(p.groups == 1 && weight.shape[1] == x.channels && weight.shape[2] == p.kernelH
                 && weight.shape[3] == p.kernelW, "quantizedConv2d: weight \(weight.shape) does not fit \(x.channels) input channels with \(p)")
    precondition(bias.count == cout, "quantizedConv2d: bias has \(bias.count) values for \(cout) channels")
    let (ho, wo) = p.outputSize(h: x.height, w: x.width)
    precondition(ho > 0 && wo > 0, "quantizedConv2d: input \(x.height)×\(x.width) is smaller than the kernel")
    precondition(y.channels == cout && y.height == ho && y.width == wo,
                 "quantizedConv2d: output \(y.channels)×\(y.height)×\(y.width) for \(cout)×\(ho)×\(wo)")
    precondition(residual.map { $0.hasShape(of: y) } ?? true, "quantizedConv2d: the residual's shape differs from the output's")
    // The GEMM reads the residual again after storing a strip, for the output's range.
    precondition(residual.map { $0.base != y.base } ?? true, "quantizedConv2d: the residual is the output")
    let threads = Parallel.width
    let planes = QuantizedPlanes(channels: x.channels, ho: ho, wo: wo, p)
    // Parts for threads to claim as they come free, whole strips each.
    let parts = Parallel.ranges(ho * planes.width, parts: 4 * threads, align: 16)
    let workers = min(threads, parts.count), ranges = Parallel.ranges(x.count, parts: 4 * threads, align: 64)
    // Blocks of about 64 K input floats, at least a block a thread.
    let blocks = max(threads, x.count / (1 << 16)) / planes.quads + 1, blockRows = (x.height + blocks - 1) / blocks
    // Strips copy their B rows into a panel (`int8GEMM`) where the rows lie in a stride's phase
    // planes and there are tiles enough to share the copy.
    let packs = p.strideH * p.strideW > 1 && cout >= 64
    let panelFloats = packs ? (int8PanelBytes(steps: weight.steps) / 4 + 15) / 16 * 16 : 0
    let (scratchFloats, rows) = scratch.take(floats: workers * panelFloats + planes.count + 2 * cout + workers * 144
                                             + 2 * ranges.count, ints: weight.steps)
    let panels = scratchFloats, floats = scratchFloats + workers * panelFloats
    let bytes = UnsafeMutableRawPointer(floats).bindMemory(to: UInt32.self, capacity: planes.count)
    let scales = floats + planes.count, offsets = UnsafeMutableRawPointer(scales + cout).bindMemory(to: Int32.self, capacity: cout)
    let staging = scales + 2 * cout, extents = staging + workers * 128, extremes = extents + workers * 16
    let xa = Address(x.base)
    let range = x.range ?? {
        Parallel.forEach(ranges.count, threads: threads, Extremes(x: xa, ranges: ranges, into: Address(extremes)))
        var (lo, hi) = (extremes[0], extremes[1])
        for i in 1..<ranges.count { (lo, hi) = (min(lo, extremes[2 * i]), max(hi, extremes[2 * i + 1])) }
        return ValueRange(lower: lo, upper: hi)
    }()
    let quantization = ActivationQuantization(minimum: range.lower, maximum: range.upper)
    let rowBlocks = (x.height + blockRows - 1) / blockRows
    Parallel.forEach(planes.quads * rowBlocks, threads: threads, Quantize(
        x: xa, channels: x.channels, height: x.height, width: x.width, blockRows: blockRows, rowBlocks: rowBlocks,
        planes: planes, quantization: quantization, into: Address(bytes)))
    for o in 0..<cout {
        scales[o] = quantization.scale * weight.scales[o]
        offsets[o] = quantization.zero &* weight.sums[o]
    }
    for t in 0..<workers {
        (extents + 16 * t).initialize(repeating: .infinity, count: 8)
        (extents + 16 * t + 8).initialize(repeating: -.infinity, count: 8)
    }
    planes.rowOffsets(into: rows)
    weight.values.withUnsafeBufferPointer { wb in
    bias.withUnsafeBufferPointer { bb in
        Parallel.forEach(parts.count, threads: workers, QuantizedConvParts(
            weight: Address(wb.baseAddress!), steps: weight.steps, b: Address(bytes), rows: Address(rows),
            scales: Address(scales), offsets: Address(offsets), bias: Address(bb.baseAddress!), activation: activation,
            y: Address(y.base), residual: residual.map { Address($0.base) }, staging: Address(staging),
            extents: Address(extents), cout: cout, parts: parts, width: planes.width, plane: ho * wo, wo: wo,
            panels: packs ? Address(panels) : nil, panelFloats: panelFloats))
    }
    }
    var output = ValueRange(lower: .infinity, upper: -.infinity)
    for t in 0..<workers {
        let lanes = extents + 16 * t
        for i in 0..<8 { (output.lower, output.upper) = (min(output.lower, lanes[i]), max(output.upper, lanes[8 + i])) }
    }
    return output
}

/// The smallest and largest float of each range of the input, into `into[2i]`, `into[2i + 1]`.
private struct Extremes: ParallelWork {
    let x: Address<Float>, ranges: Partition, into: Address<Float>

    func run(part: Int, thread: Int) {
        let r = ranges[part], base = x.pointer + r.lowerBound, count = r.count
        var (lo, hi) = (__m256(repeating: .infinity), __m256(repeating: -.infinity))
        var i = 0
        while i + 8 <= count {
            let v = UnsafeRawPointer(base + i).loadUnaligned(as: __m256.self)
            (lo, hi) = (lanesMin(lo, v), lanesMax(hi, v))
            i += 8
        }
        var (l, h) = (lo.min(), hi.max())
        while i < count {
            (l, h) = (min(l, base[i]), max(h, base[i]))
            i += 1
        }
        (into.pointer[2 * part], into.pointer[2 * part + 1]) = (l, h)
    }
}

private struct Quantize: ParallelWork {
    let x: Address<Float>, channels: Int, height: Int, width: Int, blockRows: Int, rowBlocks: Int
    let planes: QuantizedPlanes, quantization: ActivationQuantization, into: Address<UInt32>

    func run(part: Int, thread: Int) {
        let first = part % rowBlocks * blockRows
        planes.fill(quad: part / rowBlocks, rows: first..<min(height, first + blockRows),
                    from: Map(x.pointer, channels: channels, height: height, width: width), quantization, into: into.pointer)
    }
}

/// `quantizedConv2d`'s GEMM: a part is a range of the grid's columns.
private struct QuantizedConvParts: ParallelWork {
    let weight: Address<UInt32>, steps: Int, b: Address<UInt32>, rows: Address<Int>
    let scales: Address<Float>, offsets: Address<Int32>, bias: Address<Float>, activation: Activation
    let y: Address<Float>, residual: Address<Float>?, staging: Address<Float>, extents: Address<Float>
    let cout: Int, parts: Partition, width: Int, plane: Int, wo: Int
    let panels: Address<Float>?, panelFloats: Int

    func run(part: Int, thread t: Int) {
        int8GEMM(weight.pointer, m: cout, steps: steps, b: b.pointer, rows: rows.pointer, columns: parts[part],
                 runs: (wo, width), c: y.pointer, ldc: plane, residual: residual.map { UnsafePointer($0.pointer) },
                 Int8Epilogue(offsets: offsets.pointer, scales: scales.pointer, bias: bias.pointer, activation: activation),
                 staging: staging.pointer + t * 128, extent: extents.pointer + t * 16,
                 panel: panels.map { UnsafeMutableRawPointer($0.pointer + t * panelFloats) })
    }
}

extension Reference {
    /// `quantizedConv2d` one multiply-add at a time, from the same quantized weights and input
    /// quantization: the exact Int32 sums, then the same float steps (activation none).
    package static func quantizedConv2d(_ x: Tensor, weight: QuantizedConvWeights, bias: [Float], _ p: Conv2DParameters,
                                        _ quantization: ActivationQuantization) -> Tensor {
        let (cin, h, w) = (x.shape[1], x.shape[2], x.shape[3])
        let (cout, kh, kw) = (weight.shape[0], p.kernelH, p.kernelW)
        let (ho, wo) = p.outputSize(h: h, w: w)
        let quads = weight.quads, steps = weight.steps
        var y = [Float](repeating: 0, count: cout * ho * wo)
        for o in 0..<cout {
            let scale = quantization.scale * weight.scales[o]
            for oy in 0..<ho {
                for ox in 0..<wo {
                    var sum: Int32 = 0
                    for c in 0..<cin {
                        for ky in 0..<kh {
                            for kx in 0..<kw {
                                let iy = oy * p.strideH - p.padH + ky, ix = ox * p.strideW - p.padW + kx
                                let inside = iy >= 0 && iy < h && ix >= 0 && ix < w
                                let byte = inside ? Int32(quantize(x.scalars[(c * h + iy) * w + ix], quantization)) : quantization.zero
                                let step = (ky * kw + kx) * quads + c / 4
                                let packed = weight.values[(o / 4 * steps + step) * 4 + o % 4]
                                sum += Int32(Int8(truncatingIfNeeded: packed >> (8 * (c % 4)))) * (byte - quantization.zero)
                            }
                        }
                    }
                    y[(o * ho + oy) * wo + ox] = Float(sum) * scale + bias[o]
                }
            }
        }
        return Tensor(shape: [1, cout, ho, wo], scalars: y)
    }
}

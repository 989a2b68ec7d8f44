/// activation(y + nearest-neighbour upsampling of x by an integer factor): YOLOv9's `CBFuse`,
/// which sums coarser maps brought to the finest one's size by `F.interpolate(mode="nearest")`,
/// and a 1×1 convolution's upsampled front (YOLONet's `UpsampledFront`).
/// x: [N, C, H, W], y: [N, C, H·s, W·s] → [N, C, H·s, W·s].
public func addUpsampledNearest(_ x: Tensor, scale: Int, to y: Tensor, activation: Activation = .none) -> Tensor {
    precondition(x.rank == 4 && scale >= 1 && y.shape == [x.shape[0], x.shape[1], x.shape[2] * scale, x.shape[3] * scale],
                 "addUpsampledNearest: x \(x.shape) by \(scale) to y \(y.shape)")
    var sum = y
    let (c, h, w) = (y.shape[1], y.shape[2], y.shape[3])
    sum.scalars.withUnsafeMutableBufferPointer { yb in
        for image in 0..<x.shape[0] {
            x.withMap(image: image) {
                addUpsampledNearest($0, scale: scale, into: Map(yb.baseAddress! + image * c * h * w, channels: c, height: h, width: w),
                                    activation: activation, scratch: Scratch())
            }
        }
    }
    return sum
}

/// One image: y [C, H·s, W·s] = activation(y + x [C, H, W] upsampled). A source row is widened
/// once into its thread's row of scratch and added to its s output rows a vector at a time, each
/// activated while in L1.
package func addUpsampledNearest(_ x: Map, scale: Int, into y: Map, activation: Activation = .none, scratch: Scratch) {
    precondition(scale >= 1 && y.channels == x.channels && y.height == x.height * scale && y.width == x.width * scale,
                 "addUpsampledNearest: \(x.channels)×\(x.height)×\(x.width) by \(scale) into \(y.channels)×\(y.height)×\(y.width)")
    let rows = x.channels * x.height
    let parts = Parallel.ranges(rows, parts: y.count >= 1 << 15 ? Parallel.width : 1)
    let (buffers, _) = scratch.take(floats: scale > 1 ? parts.count * y.width : 0)
    Parallel.forEach(parts.count, AddedRows(x: Address(x.base), y: Address(y.base), wide: Address(buffers), parts: parts,
                                            w: x.width, scale: scale, activation: activation))
}

/// `addUpsampledNearest`'s part: a range of source rows (over all channels), with its row of scratch.
private struct AddedRows: ParallelWork {
    let x: Address<Float>, y: Address<Float>, wide: Address<Float>
    let parts: Partition
    let w: Int, scale: Int
    let activation: Activation

    func run(part t: Int, thread _: Int) {
        let wo = w * scale, row = wide.pointer + t * wo
        for r in parts[t] {
            var src = UnsafePointer(x.pointer + r * w)
            if scale > 1 {
                for ix in 0..<w { (row + ix * scale).update(repeating: src[ix], count: scale) }
                src = UnsafePointer(row)
            }
            for k in 0..<scale {
                let dst = y.pointer + (r * scale + k) * wo
                addVectors(dst, src, into: dst, count: wo)
                if activation != .none { applyActivation(activation, dst, dst, count: wo) }
            }
        }
    }
}

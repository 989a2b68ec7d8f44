import Tensor

/// `nn.MaxPool2d` (YOLOv3-tiny's downsampling): k×k windows every s pixels, −∞ padding p.
/// x: [C, H, W] → [C, (H + 2p − k)/s + 1, (W + 2p − k)/s + 1].
struct MaxPool: Layer {
    let kernel: Int, stride: Int, padding: Int
    let channels: Int

    /// An `nn.MaxPool2d` row: [k, s = k, p = 0].
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        kernel = try spec.int(0, "kernel", in: 1...63)
        stride = try spec.int(1, "stride", default: kernel, in: 1...64)
        padding = try spec.int(2, "padding", default: 0, in: 0...(kernel / 2))
        guard spec.args.count <= 3 else { throw spec.fail("nn.MaxPool2d supports [k, s, p], got \(spec.args)") }
        channels = spec.inputChannels[0]
    }

    var parameterCount: Int { 0 }
    func outputStride(_ inputStride: Int) -> Int { inputStride * stride }
    func outputSize(height: Int, width: Int) -> Plane {
        ((height + 2 * padding - kernel) / stride + 1, (width + 2 * padding - kernel) / stride + 1)
    }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    /// Its range is unknown: x's bounds it, but a strided pool may drop x's smallest value, and an
    /// int8 convolution quantizes finer by the exact one it then measures.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        maxPool2d(input(0), kernel: kernel, stride: stride, padding: padding, into: y!, scratch: ws.scratch)
        return y!
    }
}

/// `nn.ZeroPad2d` (YOLOv3-tiny, before its stride-1 2×2 pool): zeros around the map.
/// x: [C, H, W] → [C, top + H + bottom, left + W + right].
struct ZeroPad: Layer {
    let left: Int, right: Int, top: Int, bottom: Int
    let channels: Int

    /// An `nn.ZeroPad2d` row: [p] or [[left, right, top, bottom]].
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        let sides: [Int]
        switch spec.args.first {
        case .list(let l): sides = l.compactMap(\.int)
        case let value?: sides = value.int.map { Array(repeating: $0, count: 4) } ?? []
        case nil: sides = []
        }
        guard spec.args.count == 1, sides.count == 4, sides.allSatisfy({ (0...64).contains($0) }) else {
            throw spec.fail("nn.ZeroPad2d needs [p] or [[left, right, top, bottom]] in 0...64, got \(spec.args)")
        }
        (left, right, top, bottom) = (sides[0], sides[1], sides[2], sides[3])
        channels = spec.inputChannels[0]
    }

    var parameterCount: Int { 0 }
    func outputSize(height: Int, width: Int) -> Plane { (top + height + bottom, left + width + right) }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    /// Zeros, then each of x's rows copied into place. The range gains 0 (when there is padding).
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let (x, y) = (input(0), y!)
        y.base.update(repeating: 0, count: y.count)
        for c in 0..<x.channels {
            for row in 0..<x.height {
                (y.base + (c * y.height + top + row) * y.width + left).update(from: x.base + (c * x.height + row) * x.width, count: x.width)
            }
        }
        return y.bounded(by: left + right + top + bottom == 0 ? x.range : .union(x.range, ValueRange(lower: 0, upper: 0)))
    }
}

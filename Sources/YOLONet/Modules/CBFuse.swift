import Tensor

/// Ultralytics `CBLinear` (YOLOv9e's auxiliary branch): a plain convolution (with bias, no
/// activation) whose output channels split into the pieces `splits` that `CBFuse` layers pick
/// by index. Its map is the whole output. x: [c1, H, W] → [Σ splits, H/s, W/s].
struct CBLinear: Layer {
    let conv: Conv
    /// The pieces' channels, in order.
    let splits: [Int]

    /// A `CBLinear` row: [[c2, …], k, s]. Ultralytics takes the channels as written (unscaled).
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count <= 3, let splits = Self.splits(spec.row) else {
            throw spec.fail("CBLinear takes [[c2, …], k, s] with positive channels, got \(spec.args)")
        }
        let k = try spec.int(1, "kernel", default: 1, in: 1...64), s = try spec.int(2, "stride", default: 1, in: 1...64)
        conv = try Conv(&w, spec.prefix + ".conv", spec.inputChannels[0], splits.reduce(0, +), k: k, s: s, plain: true)
        self.splits = splits
    }

    /// The pieces' channels a `CBLinear` row names, or nil if it names none.
    static func splits(_ row: ArchRow) -> [Int]? {
        guard row.module == "CBLinear", case .list(let values)? = row.args.first else { return nil }
        let splits = values.compactMap { $0.int.flatMap { (1...65_536).contains($0) ? $0 : nil } }
        return splits.count == values.count && !splits.isEmpty ? splits : nil
    }

    var channels: Int { conv.channels }
    var parameterCount: Int { conv.parameterCount }
    func outputStride(_ inputStride: Int) -> Int { conv.outputStride(inputStride) }
    func outputSize(height: Int, width: Int) -> Plane { conv.outputSize(height: height, width: width) }
    func flops(inputs: [Plane], output: Plane) -> Double { conv.flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        conv(input(0), into: y!, ws)
    }
}

/// Ultralytics `CBFuse`: the sum of a piece of each `CBLinear` input (piece `idx[k]` of input k),
/// brought to the last input's size by nearest-neighbour upsampling, and the last input.
/// inputs: CBLinear maps at strides that are multiples of the last's, then [C, H, W] → [C, H, W].
struct CBFuse: Layer {
    /// Per CBLinear input: the piece's channels in its map and the upsampling factor.
    let pieces: [(channels: Range<Int>, scale: Int)]
    let channels: Int

    /// A `CBFuse` row: [[idx, …]], one index per input but the last.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let sources = spec.from.dropLast()
        guard spec.args.count == 1, case .list(let values) = spec.args[0], values.count == sources.count, !sources.isEmpty else {
            throw spec.fail("CBFuse takes [[idx, …]] with one index per input but the last, got \(spec.args) for inputs \(spec.from)")
        }
        let (channels, target) = (spec.inputChannels.last!, spec.inputStrides.last!)
        self.channels = channels
        pieces = try zip(sources.indices, values).map { k, value in
            guard let splits = CBLinear.splits(spec.architecture.rows[spec.from[k]]) else {
                throw spec.fail("CBFuse input \(spec.from[k]) is not a CBLinear")
            }
            guard let j = value.int, splits.indices.contains(j) else {
                throw spec.fail("CBFuse index \(value) is not a piece of layer \(spec.from[k]) (\(splits.count) pieces)")
            }
            guard splits[j] == channels else {
                throw spec.fail("piece \(j) of layer \(spec.from[k]) has \(splits[j]) channels, the last input \(channels)")
            }
            guard spec.inputStrides[k] % target == 0 else {
                throw spec.fail("layer \(spec.from[k]) at stride \(spec.inputStrides[k]) is finer than the last input's \(target)")
            }
            let start = splits[..<j].reduce(0, +)
            return (start..<(start + splits[j]), spec.inputStrides[k] / target)
        }
    }

    var parameterCount: Int { 0 }
    func outputStride(_ inputStride: Int) -> Int { inputStride / pieces[0].scale }
    func outputSize(height: Int, width: Int) -> Plane { (height * pieces[0].scale, width * pieces[0].scale) }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    /// Sums in Ultralytics' order: the first piece, the others, the last input.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let y = y!
        upsampleNearest(input(0).channels(pieces[0].channels), scale: pieces[0].scale, into: y)
        for k in 1..<pieces.count {
            addUpsampledNearest(input(k).channels(pieces[k].channels), scale: pieces[k].scale, into: y, scratch: ws.scratch)
        }
        addUpsampledNearest(input(pieces.count), scale: 1, into: y, scratch: ws.scratch)
        return y.bounded(by: nil)
    }
}

import Tensor

/// `nn.Upsample`: nearest-neighbour upsampling by an integer factor.
struct Upsample: Layer {
    let scale: Int
    let channels: Int

    /// An `nn.Upsample` row: [None, scale_factor, "nearest"].
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        let factor = try spec.int(1, "scale_factor", in: 1...64)
        guard factor >= 1, spec.args.count < 3 || spec.args[2] == .string("nearest") else {
            throw spec.fail("only nearest upsampling by a positive integer factor is supported, got \(spec.args)")
        }
        guard spec.inputStrides[0] % factor == 0 else { throw spec.fail("upsampling ×\(factor) a map of stride \(spec.inputStrides[0])") }
        (scale, channels) = (factor, spec.inputChannels[0])
    }

    var parameterCount: Int { 0 }
    func outputStride(_ inputStride: Int) -> Int { inputStride / scale }
    func outputSize(height: Int, width: Int) -> Plane { (height * scale, width * scale) }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        upsampleNearest(input(0), scale: scale, into: y!)
        return y!.bounded(by: input(0).range)
    }
}

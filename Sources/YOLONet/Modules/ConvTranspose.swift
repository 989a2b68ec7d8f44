import Tensor

/// `nn.ConvTranspose2d` with bias (YOLOv6's upsampling): k×k, stride s, padding p, with
/// k − 2p = s so that the map grows exactly s times. x: [c1, H, W] → [c2, s·H, s·W].
struct ConvTranspose: Layer {
    /// [c1, c2, k, k].
    let weight: Tensor
    let bias: [Float]
    let stride: Int, padding: Int

    /// An `nn.ConvTranspose2d` row: [c2, k, s = 1, p = 0].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let k = try spec.int(1, "kernel", in: 1...16)
        stride = try spec.int(2, "stride", default: 1, in: 1...16)
        padding = try spec.int(3, "padding", default: 0, in: 0...k)
        guard spec.args.count <= 4, k - 2 * padding == stride else {
            throw spec.fail("nn.ConvTranspose2d supports [c2, k, s, p] with k − 2p = s, got \(spec.args)")
        }
        guard spec.inputStrides[0] % stride == 0 else { throw spec.fail("upsampling ×\(stride) a map of stride \(spec.inputStrides[0])") }
        // It runs on OpenBLAS: a missing library is an error here, not a crash at the first inference.
        try BLAS.load()
        weight = try w.tensor(spec.prefix + ".weight", shape: [c1, c2, k, k])
        bias = try w.tensor(spec.prefix + ".bias", shape: [c2]).scalars
    }

    var channels: Int { weight.shape[1] }
    var parameterCount: Int { weight.count + bias.count }
    func outputStride(_ inputStride: Int) -> Int { inputStride / stride }
    func outputSize(height: Int, width: Int) -> Plane { (height * stride, width * stride) }
    func flops(inputs: [Plane], output: Plane) -> Double { 2 * Double(weight.count * inputs[0].height * inputs[0].width) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        convTranspose2d(input(0), weight: weight, bias: bias, stride: stride, padding: padding, into: y!, scratch: ws.scratch)
        return y!
    }
}

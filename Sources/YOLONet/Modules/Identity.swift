import Tensor

/// `nn.Identity` (YOLOv9e's first layer, which keeps the image for its auxiliary branch;
/// `Silence` in older checkpoints): a copy of its input.
struct Identity: Layer {
    let channels: Int

    /// An `nn.Identity` row: [].
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        guard spec.args.isEmpty else { throw spec.fail("\(spec.row.module) takes no arguments, got \(spec.args)") }
        channels = spec.inputChannels[0]
    }

    var parameterCount: Int { 0 }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        input(0).write(to: y!)
        return y!.bounded(by: input(0).range)
    }
}

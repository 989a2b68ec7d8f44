import Tensor

/// Ultralytics `Concat` along channels. Its inputs' layers mostly write their parts of its map
/// in place (`Network.writesConcatFront`, `writesConcatBack`); it copies the others.
struct Concat: Layer {
    let channels: Int
    /// The number of inputs.
    let count: Int

    /// A `Concat` row: [dimension], only 1 (channels).
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws {
        guard try spec.int(0, "dimension", default: 1, in: 1...1) == 1 else { throw spec.fail("only channel concatenation is supported") }
        guard spec.inputStrides.allSatisfy({ $0 == spec.inputStrides[0] }) else {
            throw spec.fail("concatenated maps \(spec.from) have different strides")
        }
        (channels, count) = (spec.inputChannels.reduce(0, +), spec.from.count)
    }

    var parameterCount: Int { 0 }
    func flops(inputs: [Plane], output: Plane) -> Double { 0 }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        var channel = 0, range = input(0).range
        for k in 0..<count {
            let part = input(k), destination = y!.channels(channel..<(channel + part.channels))
            if part.base != destination.base { part.write(to: destination) }
            channel += part.channels
            range = .union(range, part.range)
        }
        return y!.bounded(by: range)
    }
}

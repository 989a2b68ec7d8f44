import Tensor

/// A row of n > 1 repeats of a module that takes no repeat count (`Module.repeatable` false),
/// e.g. YOLOv3's `[-1, 8, Bottleneck, [256]]` or YOLOv6's `[-1, 6, Conv, [128, 3, 1]]`: Ultralytics
/// builds `nn.Sequential` of n copies, `model.i.0` … `model.i.<n-1>`, each fed by the one before.
/// x: the first copy's input → the last copy's output.
struct Sequential: Layer {
    /// `model.<i>`: copy j is `model.<i>.<j>`, the name its output is observed by.
    let name: String
    let layers: [any Layer]

    /// The row's module, `spec.repeats` times; copy j > 0 reads copy j − 1's output.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard let type = Network.modules[spec.row.module] else {
            throw ModelError.unknownModule(layer: spec.index, module: spec.row.module)
        }
        guard spec.from.count == 1 else { throw spec.fail("\(spec.row.module) with several inputs cannot repeat") }
        var layers = [any Layer](), (channels, stride) = (spec.inputChannels[0], spec.inputStrides[0])
        for j in 0..<spec.repeats {
            let copy = ModuleSpec(index: spec.index, row: spec.row, architecture: spec.architecture, from: spec.from,
                                  inputChannels: [channels], inputStrides: [stride], width: spec.width,
                                  maxChannels: spec.maxChannels, repeats: 1, legacy: spec.legacy, copy: j)
            guard let layer = try type.init(copy, &w) as? any Layer else { throw spec.fail("\(spec.row.module) is a head: it cannot repeat") }
            layers.append(layer)
            (channels, stride) = (layer.channels, layer.outputStride(stride))
            guard stride <= 1 << 16 else { throw spec.fail("the total stride \(stride) is too large") }
        }
        (self.layers, name) = (layers, spec.prefix)
    }

    var channels: Int { layers.last!.channels }
    var parameterCount: Int { layers.reduce(0) { $0 + $1.parameterCount } }
    var hasAttention: Bool { layers.contains { $0.hasAttention } }
    func outputStride(_ inputStride: Int) -> Int { layers.reduce(inputStride) { $1.outputStride($0) } }
    func outputSize(height: Int, width: Int) -> Plane {
        layers.reduce((height, width)) { $1.outputSize(height: $0.height, width: $0.width) }
    }

    func flops(inputs: [Plane], output: Plane) -> Double {
        var plane = inputs[0], sum = 0.0
        for layer in layers {
            let out = layer.outputSize(height: plane.height, width: plane.width)
            sum += layer.flops(inputs: [plane], output: out)
            plane = out
        }
        return sum
    }

    /// Each copy writes a map of `ws`, the last one `y`.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        var x = input(0)
        for (j, layer) in layers.enumerated() {
            let (height, width) = layer.outputSize(height: x.height, width: x.width)
            let out = j == layers.count - 1 ? y! : ws.map(channels: layer.channels, height: height, width: width)
            let next = layer.forward({ _ in x }, into: out, consuming: false, ws)
            ws.observe("\(name).\(j)", next)
            if j > 0 { ws.release(x) }
            x = next
        }
        return x
    }
}

import Tensor

/// Ultralytics `SCDown` (YOLOv10): a 1×1 Conv to c2, then a k×k stride-s depthwise conv + BN
/// without activation. x: [c1, H, W] → [c2, H/s, W/s].
struct SCDown: Layer {
    let cv1: Conv, cv2: Conv

    /// An `SCDown` row: [c2, k, s].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count == 3 else { throw spec.fail("SCDown takes [c2, k, s], got \(spec.args)") }
        let c2 = try spec.outChannels()
        let k = try spec.int(1, "kernel", in: 1...64), s = try spec.int(2, "stride", in: 1...64)
        cv1 = try Conv(&w, spec.prefix + ".cv1", spec.inputChannels[0], c2)
        cv2 = try Conv(&w, spec.prefix + ".cv2", c2, c2, k: k, s: s, g: c2, activation: .none)
    }

    var channels: Int { cv2.channels }
    var parameterCount: Int { [cv1, cv2].parameterCount }
    func outputStride(_ inputStride: Int) -> Int { cv2.outputStride(inputStride) }
    func outputSize(height: Int, width: Int) -> Plane { cv2.outputSize(height: height, width: width) }

    func flops(inputs: [Plane], output: Plane) -> Double {
        cv1.flops((inputs[0].height, inputs[0].width)) + cv2.flops(output)
    }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let t = cv1(input(0), ws)
        ws.observe(cv1.name, t)
        let out = cv2(t, into: y!, ws)
        ws.release(t)
        return out
    }
}

import Tensor

/// Ultralytics `AConv` (YOLOv9 t/s/m): a 2×2 stride-1 average pool, then a 3×3 stride-2 Conv.
/// x: [c1, H, W] → [c2, H/2, W/2].
struct AConv: Layer {
    let cv1: Conv

    /// An `AConv` row: [c2].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count == 1 else { throw spec.fail("AConv takes [c2], got \(spec.args)") }
        cv1 = try Conv(&w, spec.prefix + ".cv1", spec.inputChannels[0], try spec.outChannels(), k: 3, s: 2)
    }

    var channels: Int { cv1.channels }
    var parameterCount: Int { cv1.parameterCount }
    func outputStride(_ inputStride: Int) -> Int { inputStride * 2 }
    func outputSize(height: Int, width: Int) -> Plane { cv1.outputSize(height: height - 1, width: width - 1) }
    func flops(inputs: [Plane], output: Plane) -> Double { cv1.flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let x = input(0)
        let pooled = ws.map(channels: x.channels, height: x.height - 1, width: x.width - 1)
        avgPool2d(x, kernel: 2, into: pooled)
        let out = cv1(pooled, into: y!, ws)
        ws.release(pooled)
        return out
    }
}

/// Ultralytics `ADown` (YOLOv9 c/e): a 2×2 stride-1 average pool split in channel halves; the
/// first through a 3×3 stride-2 Conv (cv1), the second through a 3×3 stride-2 max pool (padding
/// 1) and a 1×1 Conv (cv2); each writes its half of the output. x: [c1, H, W] → [c2, H/2, W/2].
struct ADown: Layer {
    let cv1: Conv, cv2: Conv

    /// An `ADown` row: [c2]; cv1 and cv2 make c2 / 2 channels each from c1 / 2.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.args.count == 1 else { throw spec.fail("ADown takes [c2], got \(spec.args)") }
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        guard c1 % 2 == 0 else { throw spec.fail("ADown splits its input in halves: \(c1) channels") }
        cv1 = try Conv(&w, spec.prefix + ".cv1", c1 / 2, c2 / 2, k: 3, s: 2)
        cv2 = try Conv(&w, spec.prefix + ".cv2", c1 / 2, c2 / 2)
    }

    var channels: Int { 2 * cv1.channels }
    var parameterCount: Int { [cv1, cv2].parameterCount }
    func outputStride(_ inputStride: Int) -> Int { inputStride * 2 }
    func outputSize(height: Int, width: Int) -> Plane { cv1.outputSize(height: height - 1, width: width - 1) }
    func flops(inputs: [Plane], output: Plane) -> Double { [cv1, cv2].flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        let (x, y, half) = (input(0), y!, cv1.channels)
        let pooled = ws.map(channels: x.channels, height: x.height - 1, width: x.width - 1)
        avgPool2d(x, kernel: 2, into: pooled)
        let first = cv1(pooled.channels(0..<(x.channels / 2)), into: y.channels(0..<half), ws)
        ws.observe(cv1.name, first)
        let maxima = ws.map(channels: x.channels / 2, height: y.height, width: y.width)
        maxPool2d(pooled.channels((x.channels / 2)..<x.channels), kernel: 3, stride: 2, padding: 1, into: maxima,
                  scratch: ws.scratch)
        ws.release(pooled)
        let second = cv2(maxima, into: y.channels(half..<(2 * half)), ws)
        ws.observe(cv2.name, second)
        ws.release(maxima)
        return y.bounded(by: .union(first.range, second.range))
    }
}

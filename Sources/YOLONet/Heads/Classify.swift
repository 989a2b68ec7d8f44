import Tensor

/// Ultralytics `Classify`: Conv to 1280 channels, global average pool, linear → nc, softmax.
struct Classify: Head {
    let conv: Conv
    let linearWeight: Tensor, linearBias: [Float]

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, nc: Int, k: Int, s: Int) throws {
        // The linear layer runs on OpenBLAS: a missing library is an error here, not a crash at
        // the first inference.
        try BLAS.load()
        conv = try Conv(&w, p + ".conv", c1, 1280, k: k, s: s)
        linearWeight = try w.tensor(p + ".linear.weight", shape: [nc, 1280])
        linearBias = try w.tensor(p + ".linear.bias", shape: [nc]).scalars
    }

    /// A `Classify` row: [nc, k, s].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        guard spec.isLast else { throw spec.fail("the Classify head must be the last layer") }
        let nc = spec.args.first == .string("nc") ? spec.architecture.nc : try spec.int(0, "classes")
        guard nc > 0 else { throw spec.fail("Classify needs a positive number of classes") }
        try self.init(&w, spec.prefix, spec.inputChannels[0], nc: nc, k: try spec.int(1, "kernel", default: 1, in: 1...64),
                      s: try spec.int(2, "stride", default: 1, in: 1...64))
    }

    var task: ModelTask { .classify }
    var channels: Int { linearBias.count }
    var parameterCount: Int { conv.parameterCount + linearWeight.count + linearBias.count }

    /// The conv counted at its input's size, the linear layer once.
    func flops(inputs: [Plane], output: Plane) -> Double { conv.flops(inputs[0]) + 2 * Double(linearWeight.count) }

    /// x: [C, H, W] → probabilities [1, nc] (raw "logits" [1, nc] alongside), in `ws`'s buffers.
    func forward(_ input: (Int) -> Map, selection: HeadSelection, _ ws: Workspace) -> HeadMaps {
        let y = conv(input(0), ws), nc = linearBias.count
        ws.observe(conv.name, y)
        let pooledMap = ws.map(channels: 1280, height: 1, width: 1), pooled = pooledMap.base
        for c in 0..<1280 {
            var sum: Float = 0
            for i in 0..<y.plane { sum += y.base[c * y.plane + i] }
            pooled[c] = sum / Float(y.plane)
        }
        ws.release(y)
        let logitsMap = ws.result(channels: 1, height: 1, width: nc), probsMap = ws.result(channels: 1, height: 1, width: nc)
        let (logits, probs) = (logitsMap.base, probsMap.base)
        linearWeight.scalars.withUnsafeBufferPointer {
            BLAS.sgemm(transB: true, m: 1, n: nc, k: 1280, a: pooled, lda: 1280, b: $0.baseAddress!, ldb: 1280, c: logits, ldc: nc)
        }
        ws.release(pooledMap)
        for i in 0..<nc { logits[i] += linearBias[i] }
        probs.update(from: logits, count: nc)
        softmax(probs, outer: 1, length: nc, inner: 1)
        return HeadMaps(output: probsMap, outputRank: 2, protos: nil, boxes: nil, scores: nil, logits: logitsMap, extra: nil)
    }
}

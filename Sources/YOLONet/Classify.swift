import Tensor

/// Ultralytics `Classify`: Conv to 1280 channels, global average pool, linear → nc, softmax.
struct Classify: Sendable {
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

    /// x: [C, H, W] → probabilities [1, nc] (raw "logits" [1, nc] alongside), in `ws`'s buffers.
    func callAsFunction(_ x: Map, _ ws: Workspace) -> HeadMaps {
        let y = conv(x, ws), nc = linearBias.count
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

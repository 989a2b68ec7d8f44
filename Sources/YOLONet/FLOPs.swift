import Tensor

/// Work and size of a graph, for benchmarks: FLOPs are 2 × multiply-adds of convolutions and
/// attention matrix products, counted from shapes. Pooling, upsampling, concatenation,
/// elementwise ops, softmax and box decoding are memory-bound and not counted.
/// yolo26n at 640×640: 5.357 GFLOP in convolutions (Ultralytics reports 5.36, convolutions
/// only) + 0.123 in its two attention blocks; 2,408,932 parameters.
extension Network {
    /// FLOPs of each top-level layer (the head last) for one [1, C, height, width] image.
    /// Every layer's output is H/stride × W/stride (`validate(input:)` makes these exact); the
    /// convolutions inside a block run at the block's output size, the head's at each input
    /// level's size.
    package func layerFLOPs(height: Int, width: Int) -> [Double] {
        nodes.map { node in
            func plane(_ stride: Int) -> (h: Int, w: Int) { (height / stride, width / stride) }
            switch node.op {
            case .detect(let head):
                let levels = node.from.map { plane(nodes[$0].stride) }
                let branches = levels.indices.reduce(0.0) { sum, i in
                    let (h, w) = levels[i]
                    let extra = head.extra.isEmpty ? [] : head.extra[i]
                    return sum + (head.box[i] + head.cls[i] + extra).reduce(0) { $0 + $1.flops(height: h, width: w) }
                }
                guard let proto = head.proto else { return branches }
                let (h, w) = levels[0]
                let refine = proto.refine.enumerated().reduce(0.0) { $0 + $1.element.flops(height: levels[$1.offset + 1].h, width: levels[$1.offset + 1].w) }
                let upsample = 2 * Double(proto.upsampleWeight.count * h * w)
                return branches + refine + upsample + proto.fuse.flops(height: h, width: w) + proto.cv1.flops(height: h, width: w)
                    + proto.cv2.flops(height: 2 * h, width: 2 * w) + proto.cv3.flops(height: 2 * h, width: 2 * w)
            case .classify(let head):
                let (h, w) = plane(nodes[node.from[0]].stride)
                return head.conv.flops(height: h, width: w) + 2 * Double(head.linearWeight.count)
            default:
                let (h, w) = plane(node.stride)
                return node.op.convs.reduce(0) { $0 + $1.flops(height: h, width: w) }
                    + node.op.attentions.reduce(0) { $0 + $1.matmulFLOPs(positions: h * w) }
            }
        }
    }

    /// Parameters of the graph as it runs (BatchNorm folded into conv biases, only the head
    /// used for inference): what Ultralytics reports for a fused model.
    package var parameterCount: Int {
        nodes.reduce(0) { sum, node in
            var count = node.op.convs.reduce(0) { $0 + $1.weight.count + $1.bias.count }
            switch node.op {
            case .detect(let head):
                count += head.dfl.count + (head.proto.map { $0.upsampleWeight.count + $0.upsampleBias.count } ?? 0)
            case .classify(let head):
                count += head.linearWeight.count + head.linearBias.count
            default:
                break
            }
            return sum + count
        }
    }
}

extension Network.Op {
    var convs: [Conv] {
        switch self {
        case .conv(let c): [c]
        case .c3k2(let m): [m.cv1, m.cv2] + m.m.flatMap(\.convs)
        case .sppf(let m): [m.cv1, m.cv2]
        case .c2psa(let m): [m.cv1, m.cv2] + m.m.flatMap(\.convs)
        case .upsample, .concat: []
        case .detect(let head):
            (head.box + head.cls + head.extra).flatMap { $0 }
                + (head.proto.map { $0.refine + [$0.fuse, $0.cv1, $0.cv2, $0.cv3] } ?? [])
        case .classify(let head): [head.conv]
        }
    }

    var attentions: [Attention] {
        switch self {
        case .c3k2(let m): m.m.compactMap { if case .attention(_, let psa) = $0 { psa.attn } else { nil } }
        case .c2psa(let m): m.m.map(\.attn)
        default: []
        }
    }
}

extension Conv {
    /// FLOPs for an output plane of height × width.
    func flops(height: Int, width: Int) -> Double {
        flops(outputShape: [1, weight.shape[0], height, width])
    }
}

extension Bottleneck {
    var convs: [Conv] { [cv1, cv2] }
}

extension C3k {
    var convs: [Conv] { [cv1, cv2, cv3] + m.flatMap(\.convs) }
}

extension C3k2.Block {
    var convs: [Conv] {
        switch self {
        case .bottleneck(let b): b.convs
        case .c3k(let c): c.convs
        case .attention(let b, let psa): b.convs + psa.convs
        }
    }
}

extension PSABlock {
    var convs: [Conv] { [attn.qkv, attn.proj, attn.pe, ffn0, ffn1] }
}

extension Attention {
    /// qᵀk ([N, keyDim] · [keyDim, N]) and v·attnᵀ ([headDim, N] · [N, N]) for every head.
    func matmulFLOPs(positions n: Int) -> Double {
        2 * Double(heads) * Double(n) * Double(n) * Double(keyDim + headDim)
    }
}

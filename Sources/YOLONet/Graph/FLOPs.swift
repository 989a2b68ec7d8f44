import Tensor

/// Work and size of a graph, for benchmarks: FLOPs are 2 × multiply-adds of convolutions and
/// attention matrix products, counted from shapes. Pooling, upsampling, concatenation,
/// elementwise ops, softmax and box decoding are memory-bound and not counted. Each module
/// counts its own (`Module.flops`, `Module.parameterCount`).
extension Network {
    /// FLOPs of each top-level layer (the head last) for one [1, C, height, width] image.
    /// Every layer's output is H/stride × W/stride (`validate(input:)` makes these exact); the
    /// convolutions inside a block run at the block's output size, the head's at each input
    /// level's size.
    package func layerFLOPs(height: Int, width: Int) -> [Double] {
        nodes.map { node in
            func plane(_ stride: Int) -> Plane { (height / stride, width / stride) }
            return node.role.module.flops(inputs: node.from.map { plane($0 < 0 ? 1 : nodes[$0].stride) }, output: plane(node.stride))
        }
    }

    /// Parameters of the graph as it runs (BatchNorm folded into conv biases, only the head
    /// used for inference): what Ultralytics reports for a fused model.
    package var parameterCount: Int { nodes.reduce(0) { $0 + $1.role.module.parameterCount } }
}

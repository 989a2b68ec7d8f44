import Tensor

/// Reparameterized convolutions: blocks trained as parallel convolution branches of one input,
/// summed, that run as the one convolution equal to their sum. A fused checkpoint holds that
/// convolution (`conv.weight`, `conv.bias`); an unfused one the branches, each with its
/// BatchNorm, which are folded and summed here as Ultralytics' `fuse` would.
extension Conv {
    /// Ultralytics `RepConv` (YOLOv9's `RepBottleneck.cv1`): 3×3 conv + BN plus 1×1 conv + BN
    /// (`conv1`, `conv2`), then SiLU, as one 3×3 conv, the 1×1 kernel added at the centre
    /// (`get_equivalent_kernel_bias`). YOLO blocks build it with `bn=False`: no identity branch.
    /// x: [c1, H, W] → [c2, H, W].
    static func rep(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int) throws -> Conv {
        guard w.contains(prefix: p + ".conv1") else { return try Conv(&w, p, c1, c2, k: 3) }
        let (weight, bias) = merged(try w.conv(p + ".conv1", cout: c2, cinPerGroup: c1, kernel: 3, plain: false),
                                    try w.conv(p + ".conv2", cout: c2, cinPerGroup: c1, kernel: 1, plain: false))
        return Conv(p, weight: weight, bias: bias, activation: .silu, quantized: w.precision == .int8)
    }

    /// Ultralytics `RepVGGDW` (YOLOv10's large-kernel `CIB`): 7×7 depthwise conv + BN plus 3×3
    /// depthwise conv + BN (`conv`, `conv1`), then SiLU, as one 7×7 depthwise conv (`fuse`).
    /// x: [c, H, W] → [c, H, W].
    static func repVGGDW(_ w: inout some WeightSource, _ p: String, _ c: Int) throws -> Conv {
        guard w.contains(prefix: p + ".conv1") else { return try Conv(&w, p, c, c, k: 7, g: c) }
        let (weight, bias) = merged(try w.conv(p + ".conv", cout: c, cinPerGroup: 1, kernel: 7, plain: false),
                                    try w.conv(p + ".conv1", cout: c, cinPerGroup: 1, kernel: 3, plain: false))
        return Conv(p, weight: weight, bias: bias, g: c, activation: .silu, quantized: false)
    }
}

/// The convolution equal to `large` + `small` on one input (both padded to keep the size, same
/// output and input channels): `small`'s kernel zero-padded to `large`'s size at the centre, the
/// biases summed.
func merged(_ large: (weight: Tensor, bias: [Float]), _ small: (weight: Tensor, bias: [Float])) -> (weight: Tensor, bias: [Float]) {
    var weight = large.weight
    let (k, j) = (weight.shape[2], small.weight.shape[2])
    let offset = (k - j) / 2
    for filter in 0..<(weight.shape[0] * weight.shape[1]) {
        for y in 0..<j {
            for x in 0..<j { weight.scalars[(filter * k + y + offset) * k + x + offset] += small.weight.scalars[(filter * j + y) * j + x] }
        }
    }
    return (weight, zip(large.bias, small.bias).map(+))
}

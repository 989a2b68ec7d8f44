import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// RepConv (YOLOv9) and RepVGGDW (YOLOv10) from unfused checkpoints: their branches, each with its
/// BatchNorm, run as one convolution whose output is the branches' sum as PyTorch computes it.
final class ReparameterizedTests: XCTestCase {
    /// A Conv, a RepNCSPELAN4 (RepConvs in `cv2.0.m.0.cv1`, `cv3.0.m.0.cv1`), a large-kernel C2fCIB
    /// (RepVGGDW in `m.0.cv1.2`) and a Classify head.
    private static let arch = """
        {"nc": 3, "backbone": [[-1, 1, "Conv", [8, 3, 2]], [-1, 1, "RepNCSPELAN4", [16, 16, 8, 1]],
         [-1, 1, "C2fCIB", [16, true, true]]], "head": [[-1, 1, "Classify", ["nc"]]]}
        """
    private static let eps: Float = 1e-3

    /// The tensors of `arch`, the unfused branches `conv1` (RepConv) and `conv1` (RepVGGDW) planted
    /// so that the blocks read them.
    private func unfusedTensors() throws -> [String: Tensor] {
        try randomCheckpoint(arch: Self.arch, task: "classify", planted: [
            "model.1.cv2.0.m.0.cv1.conv1.conv.weight": randomTensor([4, 4, 3, 3], seed: 1, range: -0.5...0.5),
            "model.1.cv3.0.m.0.cv1.conv1.conv.weight": randomTensor([4, 4, 3, 3], seed: 2, range: -0.5...0.5),
            "model.2.m.0.cv1.2.conv1.conv.weight": randomTensor([16, 1, 3, 3], seed: 3, range: -0.5...0.5),
        ])
    }

    private func load(_ tensors: [String: Tensor]) throws -> Model { try loadCheckpoint(tensors, arch: Self.arch, task: "classify") }

    /// BatchNorm(conv(x)) of the Conv at `prefix`, through the plain reference convolution.
    private func branch(_ x: Tensor, _ tensors: [String: Tensor], _ prefix: String, groups: Int) -> Tensor {
        let weight = tensors[prefix + ".conv.weight"]!
        let k = weight.shape[2]
        var y = Reference.conv2d(x, weight: weight, bias: nil, Conv2DParameters(kernel: k, stride: 1, padding: k / 2, groups: groups))
        let (gamma, beta) = (tensors[prefix + ".bn.weight"]!, tensors[prefix + ".bn.bias"]!)
        let (mean, variance) = (tensors[prefix + ".bn.running_mean"]!, tensors[prefix + ".bn.running_var"]!)
        let plane = y.shape[2] * y.shape[3]
        for i in 0..<y.count {
            let c = i / plane % y.shape[1]
            y.scalars[i] = (y.scalars[i] - mean.scalars[c]) / (variance.scalars[c] + Self.eps).squareRoot() * gamma.scalars[c]
                + beta.scalars[c]
        }
        return y
    }

    /// Each block's output on the input it received equals SiLU of its branches' sum, within the
    /// rounding of the longest reduction (3·3·4 products and a BatchNorm per branch).
    func testUnfusedBranchesRunAsOneConvolution() throws {
        let tensors = try unfusedTensors()
        let model = try load(tensors)
        let x = randomTensor([1, 3, 32, 24], seed: 7, range: 0...1)
        var traced = [String: Tensor]()
        _ = try model.network.trace(x) { traced[$0] = $1 }
        for (input, block, groups, branches) in [
            ("model.1.cv2.0.cv1", "model.1.cv2.0.m.0.cv1", 1, ["conv1", "conv2"]),
            ("model.1.cv3.0.cv1", "model.1.cv3.0.m.0.cv1", 1, ["conv1", "conv2"]),
            ("model.2.m.0.cv1.1", "model.2.m.0.cv1.2", 16, ["conv", "conv1"]),
        ] {
            let x = try XCTUnwrap(traced[input], input), y = try XCTUnwrap(traced[block], block)
            let sum = Reference.add(branch(x, tensors, block + "." + branches[0], groups: groups),
                                    branch(x, tensors, block + "." + branches[1], groups: groups))
            assertClose(y, Reference.activated(sum, .silu), tolerance: tolerance(reduction: 64), block)
        }
    }

    /// An unfused block missing a branch is refused, naming the branch's tensor.
    func testMissingBranchIsNamed() throws {
        var tensors = try unfusedTensors()
        tensors["model.1.cv2.0.m.0.cv1.conv2.conv.weight"] = nil
        XCTAssertThrowsError(try load(tensors)) {
            XCTAssertEqual($0 as? ModelError, .missingTensor(name: "model.1.cv2.0.m.0.cv1.conv2.conv.weight", expectedShape: [4, 4, 1, 1]))
        }
    }
}

import ArgumentParser
import Foundation
import Tensor
import YOLOCore
import YOLONet

/// `yolo dump`: every top-level layer's output for a given input tensor, named like the
/// reference files (`layer.<i>`, `output.0`, `output.1.<raw map>`), for checking a port against PyTorch.
struct Dump: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write each layer's output for an input tensor to a safetensors file.")

    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache), .pt or .safetensors path.")
    var model: String

    @Option(help: "safetensors file holding tensor 'input' [1, 3, H, W].")
    var input: String

    @Option(help: "safetensors file to write.")
    var output: String

    func run() throws {
        do {
            try checkRegularOutput(output)
            let net = try Model(contentsOf: ModelStore.fromEnvironment().url(for: model))
            let source = try SafeTensorsFile(contentsOf: URL(fileURLWithPath: input))
            var tensors = [String: Tensor]()
            let head = try net.network.forward(try source.tensor("input")) { i, y in tensors["layer.\(i)"] = y }
            tensors["output.0"] = head.output
            if let protos = head.protos { tensors["output.0.1"] = protos }
            for (name, map) in head.raw { tensors["output.1.\(name)"] = map }
            try SafeTensorsFile.write(tensors, metadata: ["model": model], to: URL(fileURLWithPath: output))
            print("wrote \(tensors.count) tensors to \(output)")
        } catch {
            throw CommandFailure(error)
        }
    }
}

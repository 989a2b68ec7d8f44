import Foundation
import Tensor
import TestSupport
import YOLONet

/// A checkpoint for `arch` holding `planted` and every other tensor the loader asks for, seeded
/// random, each Conv with BatchNorm statistics (eps 1e-3), as an unfused Ultralytics checkpoint.
func randomCheckpoint(arch: String, task: String, planted: [String: Tensor] = [:]) throws -> [String: Tensor] {
    var tensors = planted, seed: UInt64 = 10
    while true {
        do {
            _ = try loadCheckpoint(tensors, arch: arch, task: task)
            return tensors
        } catch ModelError.missingTensor(let name, let shape) {
            seed += 5
            if name.hasSuffix(".conv.bias") {
                // A Conv without BatchNorm asks for its bias: give it BatchNorm instead.
                let bn = name.dropLast("conv.bias".count) + "bn."
                tensors[bn + "weight"] = randomTensor(shape, seed: seed, range: 0.5...1.5)
                tensors[bn + "bias"] = randomTensor(shape, seed: seed + 1, range: -0.2...0.2)
                tensors[bn + "running_mean"] = randomTensor(shape, seed: seed + 2, range: -0.2...0.2)
                tensors[bn + "running_var"] = randomTensor(shape, seed: seed + 3, range: 0.5...1.5)
            } else {
                tensors[name] = randomTensor(shape, seed: seed, range: -0.5...0.5)
            }
        }
    }
}

/// The model of `tensors` with `arch` as its architecture.
func loadCheckpoint(_ tensors: [String: Tensor], arch: String, task: String) throws -> Model {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-\(UUID()).safetensors")
    defer { try? FileManager.default.removeItem(at: url) }
    try SafeTensorsFile.write(tensors, metadata: ["arch": arch, "task": task, "bn_eps": "0.001"], to: url)
    return try Model(contentsOf: url)
}

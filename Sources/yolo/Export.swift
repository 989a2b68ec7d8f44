import ArgumentParser
import Foundation
import Tensor
import YOLOCore
import YOLONet

/// `yolo export`: an Ultralytics `.pt` checkpoint (or any weight file) written as a
/// `yolo-safetensors/1` file, the tensors as the checkpoint holds them (BatchNorm unfused).
struct Export: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a model, e.g. an Ultralytics .pt checkpoint, as a yolo-safetensors/1 file.")

    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache), .pt or .safetensors path.")
    var model: String

    @Option(help: "Output format; only safetensors.")
    var format = "safetensors"

    @Flag(help: "Write F16 tensors (rounded to nearest even); the default F32 is exact for F16, BF16 and F32 checkpoints.")
    var half = false

    @Option(name: .shortAndLong, help: ArgumentHelp(
        "File to write (default: the model's path with the extension .safetensors).",
        discussion: "A model from the download cache is written to <name>.safetensors in the current directory."))
    var output: String?

    func validate() throws {
        guard format == "safetensors" else { throw ValidationError("unknown format '\(format)'; supported: safetensors") }
    }

    func run() throws {
        do {
            let store = try ModelStore.fromEnvironment()
            let input = try store.url(for: model)
            // Beside the model, except in the cache, where a file would count as a download.
            let inCache = input.deletingLastPathComponent().standardizedFileURL.path
                == store.cacheDirectory.standardizedFileURL.path
            let stem = inCache ? URL(fileURLWithPath: model).deletingPathExtension().lastPathComponent
                : input.deletingPathExtension().path
            let destination = URL(fileURLWithPath: output ?? stem + ".safetensors")
            guard destination.standardizedFileURL.path != input.standardizedFileURL.path else {
                throw CommandFailure(message: "\(destination.path) is the model itself; choose another file with -o")
            }
            try checkRegularOutput(destination.path)
            let file = try SafeTensorsFile(contentsOf: input)
            // The file is written only if it makes the same network.
            let built = try Model(file: file)
            var tensors = [String: Tensor]()
            for name in file.names { tensors[name] = try file.tensor(name) }
            var metadata = file.metadata
            metadata["source_sha256"] = try Data(contentsOf: input, options: .alwaysMapped).sha256Hex
            try SafeTensorsFile.write(tensors, metadata: metadata, half: half, to: destination)
            print("\(destination.path): \(built.task), \(built.names.count) classes, \(tensors.count) tensors in "
                  + (half ? "F16" : "F32") + (metadata["bn_eps"] != nil ? ", BatchNorm unfused" : ""))
        } catch let failure as CommandFailure {
            throw failure
        } catch {
            throw CommandFailure(error)
        }
    }
}

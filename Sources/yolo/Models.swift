import ArgumentParser
import Foundation
import YOLOCore

/// `yolo models`: `YOLO.availableModels()` as a model selector groups it.
struct Models: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List the models: official names by family (with their file when on this machine) and your own weight files.")

    @Flag(help: "Only the models on this machine.")
    var local = false

    func run() throws {
        do {
            let models = try YOLO.availableModels().filter { !local || $0.file != nil }
            for group in ModelInfo.Group.allCases {
                let members = models.filter { $0.group == group }
                guard !members.isEmpty else { continue }
                print(group.rawValue)
                let width = members.map(\.name.count).max() ?? 0
                for model in members {
                    let name = model.name.padding(toLength: width, withPad: " ", startingAt: 0)
                    let columns = [model.family, model.task?.rawValue ?? "?", model.size ?? "-",
                                   model.file?.path ?? "(downloaded on first use)"]
                    print("  \(name)  " + columns.joined(separator: "  "))
                }
            }
        } catch {
            throw CommandFailure(error)
        }
    }
}

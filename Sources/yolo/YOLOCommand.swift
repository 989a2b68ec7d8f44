import ArgumentParser
import Foundation
import Tensor
import YOLOCore

@main
struct YOLOCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "yolo",
        abstract: "Run Ultralytics YOLO models in Swift.",
        subcommands: [Predict.self, Track.self, Solutions.self, Val.self, Export.self, Dump.self])

    /// A CPU without the features this build targets gets a message, not an illegal instruction.
    static func main() async {
        do {
            try CPU.checkTargetFeatures()
        } catch {
            FileHandle.standardError.write(Data("Error: \(CommandFailure(error))\n".utf8))
            Foundation.exit(1)
        }
        await main(nil)
    }
}

/// A runtime failure: ArgumentParser prints "Error: <message>" on one line and exits 1,
/// without the usage text it shows for argument mistakes.
struct CommandFailure: Error, CustomStringConvertible {
    let description: String

    init(_ error: any Error) {
        description = (error as? LocalizedError)?.errorDescription ?? "\(error)"
    }

    init(message: String) {
        description = message
    }
}

extension YOLOPrecision: ExpressibleByArgument {}

import ArgumentParser
import Foundation
import Tensor
import YOLOCore

@main
struct YOLOCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "yolo",
        abstract: "Run Ultralytics YOLO models in Swift.",
        discussion: "Options are also taken in Ultralytics' form: yolo predict model=yolo26n.pt source=bus.jpg conf=0.5 save_txt=True.",
        version: "yolo-swift 0.1.0 (Ultralytics 8.4.190 results)",
        subcommands: [Predict.self, Track.self, Solutions.self, Val.self, Export.self, Dump.self, Models.self, Serve.self])

    /// A CPU without the features this build targets gets a message, not an illegal instruction.
    /// Ultralytics' `key=value` form is rewritten into options first (`UltralyticsArguments`).
    static func main() async {
        do {
            try CPU.checkTargetFeatures()
        } catch {
            FileHandle.standardError.write(Data("Error: \(CommandFailure(error))\n".utf8))
            Foundation.exit(1)
        }
        let arguments: [String]
        do {
            arguments = try UltralyticsArguments.translate(Array(CommandLine.arguments.dropFirst()),
                                                           verbs: configuration.subcommands)
        } catch {
            exit(withError: error)
        }
        await main(arguments)
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
extension CSVBoxFormat: ExpressibleByArgument {}

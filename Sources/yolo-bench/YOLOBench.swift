import ArgumentParser
import Foundation
import Tensor

@main
struct YOLOBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "yolo-bench",
        abstract: "Latency benchmarks for yolo-swift.",
        subcommands: [ModelBench.self, SGEMMBench.self, ConvBench.self, VideoBench.self, TrackerBench.self],
        defaultSubcommand: ModelBench.self)

    /// Refuses a CPU without the features this build targets, and warns about a build without
    /// AVX2 and FMA, whose timings say nothing about the SIMD kernels.
    static func main() async {
        do {
            try CPU.checkTargetFeatures()
        } catch {
            FileHandle.standardError.write(Data("Error: \((error as? LocalizedError)?.errorDescription ?? "\(error)")\n".utf8))
            Foundation.exit(1)
        }
        if let warning = CPU.slowBuildWarning { FileHandle.standardError.write(Data((warning + "\n").utf8)) }
        await main(nil)
    }
}

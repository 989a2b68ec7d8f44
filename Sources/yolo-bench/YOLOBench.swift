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

    /// Refuses a CPU without the features this build targets, and warns about a build for
    /// baseline x86-64, whose timings say nothing about the SIMD kernels.
    static func main() async {
        do {
            try CPU.checkTargetFeatures()
        } catch {
            FileHandle.standardError.write(Data("Error: \((error as? LocalizedError)?.errorDescription ?? "\(error)")\n".utf8))
            Foundation.exit(1)
        }
        if CPU.buildTargetsBaseline {
            FileHandle.standardError.write(Data("""
                WARNING: built for baseline x86-64 (no AVX or FMA): the SIMD kernels run as scalar code. \
                Build with -Xswiftc -target-cpu -Xswiftc native.\n
                """.utf8))
        }
        await main(nil)
    }
}

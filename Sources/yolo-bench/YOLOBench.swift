import ArgumentParser

@main
struct YOLOBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "yolo-bench",
        abstract: "Latency benchmarks for yolo-swift.",
        subcommands: [ModelBench.self, SGEMMBench.self, ConvBench.self],
        defaultSubcommand: ModelBench.self)
}

import ArgumentParser

@main
struct YOLOBench: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "yolo-bench",
        abstract: "Latency benchmarks for yolo-swift.",
        subcommands: [ModelBench.self, SGEMMBench.self, ConvBench.self, VideoBench.self, TrackerBench.self],
        defaultSubcommand: ModelBench.self)
}

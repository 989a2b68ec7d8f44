import ArgumentParser
import Foundation
import Tensor

enum OutputFormat: String, ExpressibleByArgument, CaseIterable {
    case md, csv, json, jsonl
}

/// What every run of one invocation shares.
struct BenchSetup {
    let model: String
    /// The weight file, or "random".
    let weights: String
    /// "fp32" or "int8": the convolutions' arithmetic.
    let precision: String
    let parameters: Int
    let gflop: Double
    let imgsz: Int
    let iters: Int
    let warmup: Int
    let repetitions: Int
    /// 1024³ sgemm GFLOP/s per thread count, in run order.
    let sgemmPeaks: [(threads: Int, gflops: Double)]
    /// OpenBLAS's kernels (measured in a child process, so this one does not load OpenBLAS).
    let blasCore: String

    var warnings: [String] {
        var warnings = [String]()
        #if DEBUG
        warnings.append("WARNING: debug build: timings are meaningless; build with `-c release`")
        #endif
        if weights == "random" {
            warnings.append("WARNING: random weights: latency does not depend on weight values (no weight file found for '\(model)')")
        }
        return warnings
    }
}

/// One timed (model, threads, repetition) run; the JSON object of `--output json`.
struct RunRecord: Encodable {
    let model: String
    let weights: String
    let precision: String
    let parameters: Int
    let gflop: Double
    let imgsz: Int
    let threads: Int
    let repetition: Int
    let iters: Int
    let warmup: Int
    let latencyMs: Latency
    let imagesPerSecond: Double
    let sgemmPeakGflops: Double
    /// nil with `--no-per-layer`.
    let layers: [LayerRecord]?
    /// nil without `--source`.
    let pipeline: PipelineRecord?
    let peakRssMb: Double
    let build: String
    let buildType: String
    let cpu: String
    let simd: String
    let blasCore: String
    let timestamp: String

    init(setup: BenchSetup, threads: Int, sgemmPeak: Double, repetition: Int, latency: Latency, layers: [LayerRecord]?,
         pipeline: PipelineRecord?) {
        (model, weights, precision, parameters) = (setup.model, setup.weights, setup.precision, setup.parameters)
        (gflop, imgsz) = (setup.gflop, setup.imgsz)
        (self.threads, self.repetition, iters, warmup) = (threads, repetition, setup.iters, setup.warmup)
        latencyMs = latency
        imagesPerSecond = 1e3 / latency.median
        sgemmPeakGflops = sgemmPeak
        (self.layers, self.pipeline) = (layers, pipeline)
        peakRssMb = Double(peakRSSKilobytes()) / 1024
        (build, buildType) = (buildCommit, buildKind)
        (cpu, simd, blasCore) = (CPU.modelName, CPU.simdLevel, setup.blasCore)
        timestamp = utcTimestamp()
    }
}

struct LayerRecord: Encodable {
    let index: Int
    let name: String
    let type: String
    let shape: [Int]
    /// Median over the instrumented passes.
    let ms: Double
    /// Share of the sum of all layers' medians.
    let percent: Double
    let gflop: Double
    let gflops: Double
    /// GFLOP/s as a percentage of the run's sgemm peak.
    let percentOfPeak: Double
}

/// Prints runs as they finish in the chosen format: markdown tables like llama-bench's, one
/// CSV row per run, a JSON array, or one JSON object per line.
struct Report {
    let format: OutputFormat
    let setup: BenchSetup
    private var runs = [RunRecord]()

    init(format: OutputFormat, setup: BenchSetup) {
        (self.format, self.setup) = (format, setup)
    }

    func begin() {
        switch format {
        case .md:
            let s = setup
            let peaks = s.sgemmPeaks.map { "\(fixed($0.gflops, 1)) GFLOP/s at \(threadsText($0.threads))" }
            emit((s.warnings.map { "**\($0)**\n" } + [
                "model: \(s.model) (\(s.weights)), \(fixed(Double(s.parameters) / 1e6, 2)) M parameters (BatchNorm folded), "
                    + "\(fixed(s.gflop, 2)) GFLOP per \(s.imgsz)×\(s.imgsz) image (convolutions and attention products)",
                "CPU: \(CPU.modelName) (\(CPU.simdLevel)), OpenBLAS core \(s.blasCore); sgemm 1024³ peak "
                    + peaks.joined(separator: ", "),
                "",
                "| model | precision | params | GFLOP | imgsz | threads | median ms | mean ± sd ms | p10 ms | p90 ms | img/s | GFLOP/s |",
                "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
            ]).joined(separator: "\n"))
        case .csv:
            emit(csvColumns.map(\.name).joined(separator: ","))
        case .json:
            emit("[")
        case .jsonl:
            break
        }
        if format != .md { setup.warnings.forEach(warn) }
    }

    mutating func add(_ run: RunRecord) {
        switch format {
        case .md:
            let l = run.latencyMs
            emit("| \(run.model) | \(run.precision) | \(fixed(Double(run.parameters) / 1e6, 2)) M | \(fixed(run.gflop, 2)) | \(run.imgsz) "
                + "| \(run.threads) | \(fixed(l.median, 2)) | \(fixed(l.mean, 2)) ± \(fixed(l.sd, 2)) | \(fixed(l.p10, 2)) "
                + "| \(fixed(l.p90, 2)) | \(fixed(run.imagesPerSecond, 1)) | \(fixed(run.gflop / l.median * 1e3, 1)) |")
        case .csv:
            emit(csvColumns.map { csvField($0.value(run)) }.joined(separator: ","))
        case .json:
            emit((runs.isEmpty ? "" : ",\n") + encode(run, pretty: true), newline: false)
        case .jsonl:
            emit(encode(run, pretty: false))
        }
        runs.append(run)
    }

    func end() {
        switch format {
        case .md:
            for run in runs {
                if let layers = run.layers { emit(layerTable(run, layers)) }
                if let pipeline = run.pipeline { emit(pipelineTable(run, pipeline)) }
            }
            let rss = runs.map(\.peakRssMb).max() ?? 0
            emit("\nbuild: \(buildCommit) (\(buildKind)), peak RSS \(fixed(rss, 1)) MB")
        case .json:
            emit("\n]")
        case .csv, .jsonl:
            break
        }
    }

    /// "yolo26n, 2 threads" (and the repetition when there are several).
    private func title(_ run: RunRecord) -> String {
        "### \(run.model) \(run.precision), \(threadsText(run.threads))" + (setup.repetitions > 1 ? ", repetition \(run.repetition)" : "")
    }

    private func layerTable(_ run: RunRecord, _ layers: [LayerRecord]) -> String {
        let total = layers.reduce(0) { $0 + $1.ms }
        var lines = [
            "",
            "\(title(run)): per layer, median of \(run.iters) instrumented passes, each after a timed one "
                + "(sgemm peak \(fixed(run.sgemmPeakGflops, 1)) GFLOP/s)",
            "",
            "| # | name | type | output shape | ms | % | GFLOP | GFLOP/s | % peak |",
            "|---:|---|---|---|---:|---:|---:|---:|---:|",
        ]
        for l in layers {
            // Upsample and Concat do no counted arithmetic: a dash rather than zeros.
            func work(_ value: Double, _ digits: Int) -> String { l.gflop > 0 ? fixed(value, digits) : "–" }
            lines.append("| \(l.index) | \(l.name) | \(l.type) | \(l.shape.map(String.init).joined(separator: "×")) "
                + "| \(fixed(l.ms, 3)) | \(fixed(l.percent, 1)) | \(work(l.gflop, 3)) | \(work(l.gflops, 1)) "
                + "| \(work(l.percentOfPeak, 1)) |")
        }
        let gflops = run.gflop / total * 1e3
        lines.append("| | sum | | | \(fixed(total, 3)) | 100.0 | \(fixed(run.gflop, 3)) | \(fixed(gflops, 1)) "
            + "| \(fixed(100 * gflops / run.sgemmPeakGflops, 1)) |")
        lines.append("\nsum of layer medians \(fixed(total, 2)) ms = \(fixed(100 * total / run.latencyMs.median, 1)) % "
            + "of the uninstrumented median \(fixed(run.latencyMs.median, 2)) ms")
        return lines.joined(separator: "\n")
    }

    private func pipelineTable(_ run: RunRecord, _ pipeline: PipelineRecord) -> String {
        let shape = pipeline.inputShape.map(String.init).joined(separator: "×")
        return ([
            "",
            "\(title(run)): \(pipeline.source) through YOLOCore (input \(shape)), median of \(run.iters)",
            "",
            "| stage | median ms | mean ± sd ms | p10 ms | p90 ms |",
            "|---|---:|---:|---:|---:|",
        ] + pipeline.stages.map { name, l in
            "| \(name) | \(fixed(l.median, 2)) | \(fixed(l.mean, 2)) ± \(fixed(l.sd, 2)) | \(fixed(l.p10, 2)) | \(fixed(l.p90, 2)) |"
        } + [
            "| total (sum of medians) | \(fixed(pipeline.stages.reduce(0) { $0 + $1.latency.median }, 2)) | | | |",
        ]).joined(separator: "\n")
    }
}

/// Flat CSV columns: every scalar of `RunRecord`, latency spread out, no samples or layers;
/// the `--source` stage medians are empty without it.
private let csvColumns: [(name: String, value: @Sendable (RunRecord) -> String)] = [
    ("model", \.model), ("weights", \.weights), ("precision", \.precision), ("parameters", { "\($0.parameters)" }), ("gflop", { "\($0.gflop)" }),
    ("imgsz", { "\($0.imgsz)" }), ("threads", { "\($0.threads)" }), ("repetition", { "\($0.repetition)" }),
    ("iters", { "\($0.iters)" }), ("warmup", { "\($0.warmup)" }),
    ("median_ms", { "\($0.latencyMs.median)" }), ("mean_ms", { "\($0.latencyMs.mean)" }),
    ("sd_ms", { "\($0.latencyMs.sd)" }), ("p10_ms", { "\($0.latencyMs.p10)" }), ("p90_ms", { "\($0.latencyMs.p90)" }),
    ("images_per_second", { "\($0.imagesPerSecond)" }), ("sgemm_peak_gflops", { "\($0.sgemmPeakGflops)" }),
    ("peak_rss_mb", { "\($0.peakRssMb)" }), ("build", \.build), ("build_type", \.buildType), ("cpu", \.cpu),
    ("simd", \.simd), ("blas_core", \.blasCore), ("timestamp", \.timestamp),
    ("decode_ms", { $0.pipeline.map { "\($0.decode.median)" } ?? "" }),
    ("preprocess_ms", { $0.pipeline.map { "\($0.preprocess.median)" } ?? "" }),
    ("inference_ms", { $0.pipeline.map { "\($0.inference.median)" } ?? "" }),
    ("postprocess_ms", { $0.pipeline.map { "\($0.postprocess.median)" } ?? "" }),
]

/// RFC 4180: quote a field holding a comma, quote or line break; double inner quotes.
private func csvField(_ s: String) -> String {
    s.contains(where: { ",\"\n\r".contains($0) }) ? "\"" + s.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : s
}

private func encode(_ run: RunRecord, pretty: Bool) -> String {
    let encoder = JSONEncoder()
    encoder.keyEncodingStrategy = .convertToSnakeCase
    encoder.outputFormatting = pretty ? [.prettyPrinted, .sortedKeys] : .sortedKeys
    // RunRecord holds only strings, integers and finite doubles: encoding cannot fail.
    return String(decoding: try! encoder.encode(run), as: UTF8.self)
}

private func fixed(_ x: Double, _ digits: Int) -> String { String(format: "%.\(digits)f", x) }

private func threadsText(_ t: Int) -> String { t == 1 ? "1 thread" : "\(t) threads" }

/// Unbuffered, so that rows appear as runs finish even through a pipe.
private func emit(_ text: String, newline: Bool = true) {
    FileHandle.standardOutput.write(Data((newline ? text + "\n" : text).utf8))
}

private func warn(_ text: String) {
    FileHandle.standardError.write(Data((text + "\n").utf8))
}

private var buildKind: String {
    #if DEBUG
    "debug"
    #else
    "release"
    #endif
}

/// The commit of the checkout this binary was built from, read at run time; "unknown" when
/// git or the checkout is not there.
private let buildCommit: String = {
    let git = Process()
    git.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    git.arguments = ["git", "-C", URL(fileURLWithPath: #filePath).deletingLastPathComponent().path,
                     "rev-parse", "--short", "HEAD"]
    let pipe = Pipe()
    git.standardOutput = pipe
    git.standardError = FileHandle.nullDevice
    guard (try? git.run()) != nil else { return "unknown" }
    let output = pipe.fileHandleForReading.readDataToEndOfFile()
    git.waitUntilExit()
    let commit = String(decoding: output, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    return git.terminationStatus == 0 && !commit.isEmpty ? commit : "unknown"
}()

/// Now as ISO 8601 in UTC ("2026-11-25T12:45:00Z"), through the C library: Foundation's
/// ISO8601DateFormatter loads ICU, whose memory every record after the first would count in its
/// peak RSS.
private func utcTimestamp() -> String {
    var now = time(nil), parts = tm()
    gmtime_r(&now, &parts)
    var text = [CChar](repeating: 0, count: 32)
    let length = strftime(&text, text.count, "%Y-%m-%dT%H:%M:%SZ", &parts)
    return String(decoding: text.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// The process's peak resident set size (Linux reports ru_maxrss in KB).
private func peakRSSKilobytes() -> Int {
    var usage = rusage()
    getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
    return usage.ru_maxrss
}

import Foundation
import TestSupport
import XCTest

/// Runs the built `yolo-bench` executable as a user would: exit status, stdout and stderr.
/// Runs are short (`--imgsz 64`, a few iterations); models come from built-in architectures
/// with random weights unless a test provides a weight directory.
final class YOLOBenchTests: CommandTestCase {
    override class var executableName: String { "yolo-bench" }

    /// Runs in the scratch directory with `YOLO_WEIGHTS_DIR` = `weights` (default: the empty
    /// scratch directory) and the download cache there too, so that no weight file is found by accident.
    func bench(_ arguments: [String], weights: URL? = nil, stdin: URL? = nil) throws -> CommandResult {
        try runCommand(executable, arguments, in: scratch,
                       environment: ["YOLO_WEIGHTS_DIR": (weights ?? scratch).path, "YOLO_CACHE_DIR": scratch.path], stdin: stdin)
    }

    func benchJSON(_ arguments: [String], weights: URL? = nil) throws -> [[String: Any]] {
        let result = try bench(arguments + ["--output", "json"], weights: weights)
        XCTAssertEqual(result.status, 0, result.stderr)
        return try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(result.stdout.utf8)) as? [[String: Any]],
                             result.stdout)
    }

    let short = ["--iters", "3", "--warmup", "1", "--imgsz", "64", "--threads", "1"]

    func testRejectsBadArguments() throws {
        for (arguments, message) in [
            (["--threads", "1,x"], "thread count 'x'"), (["--threads", "0"], "thread count '0'"),
            (["--output", "xml"], "xml"), (["--iters", "0"], "--iters"),
            (["--source", "bus.jpg"], "--source needs a weight file"),
        ] {
            let result = try bench(["--model", "yolo26n"] + arguments)
            XCTAssertNotEqual(result.status, 0, "\(arguments)")
            XCTAssertTrue(result.stderr.contains(message), "\(arguments): \(result.stderr)")
            XCTAssertEqual(result.stdout, "", "\(arguments): nothing is measured")
        }
    }

    func testUnknownModelIsAOneLineError() throws {
        let result = try bench(["--model", "yolo99z"] + short)
        XCTAssertNotEqual(result.status, 0)
        XCTAssertTrue(result.stderr.contains("unknown model 'yolo99z'"), result.stderr)
        XCTAssertEqual(result.stderr.trimmingCharacters(in: .newlines).split(separator: "\n").count, 1, result.stderr)
    }

    /// One object per (threads, repetition) with every documented field.
    func testJSONHasEveryField() throws {
        let runs = try benchJSON(["--model", "yolo26n", "--iters", "3", "--warmup", "1", "--imgsz", "64",
                                  "--threads", "1,2"])
        XCTAssertEqual(runs.map { $0["threads"] as? Int }, [1, 2])
        // Every record's peak RSS is the model's process, not the harness's reporting: formatting
        // the first record's timestamp through Foundation loaded 4 MB, counted by the second.
        let rss = runs.compactMap { $0["peak_rss_mb"] as? Double }
        XCTAssertEqual(rss.count, 2)
        XCTAssertLessThan(abs(rss[1] - rss[0]), 1.5, "peak RSS of the two runs: \(rss)")
        for run in runs {
            XCTAssertEqual(run["precision"] as? String, "fp32")
            for key in ["model", "imgsz", "threads", "iters", "latency_ms", "layers", "gflop", "peak_rss_mb", "build",
                        "cpu", "timestamp", "parameters", "weights", "sgemm_peak_gflops", "images_per_second"] {
                XCTAssertNotNil(run[key], "missing \(key)")
            }
            XCTAssertEqual(run["model"] as? String, "yolo26n")
            XCTAssertEqual(run["imgsz"] as? Int, 64)
            XCTAssertEqual(run["iters"] as? Int, 3)
            XCTAssertNotNil(ISO8601DateFormatter().date(from: run["timestamp"] as? String ?? ""), "RFC 3339 timestamp")
            let latency = try XCTUnwrap(run["latency_ms"] as? [String: Any])
            for key in ["median", "mean", "sd", "p10", "p90"] { XCTAssertNotNil(latency[key] as? Double, key) }
            XCTAssertGreaterThan(latency["median"] as? Double ?? 0, 0)
            XCTAssertEqual((latency["samples"] as? [Double])?.count, 3)
            let layers = try XCTUnwrap(run["layers"] as? [[String: Any]])
            XCTAssertEqual(layers.count, 24, "yolo26n has 24 top-level layers")
            XCTAssertEqual(layers.last?["type"] as? String, "Detect")
            XCTAssertEqual(layers.last?["name"] as? String, "model.23")
            for layer in layers {
                for key in ["index", "name", "type", "shape", "ms", "percent", "gflop", "gflops"] {
                    XCTAssertNotNil(layer[key], "layer \(layer["index"] ?? "?") misses \(key)")
                }
            }
            XCTAssertEqual(layers.reduce(0) { $0 + ($1["gflop"] as? Double ?? 0) }, run["gflop"] as? Double ?? 0,
                           accuracy: 1e-9)
            XCTAssertEqual(layers.reduce(0) { $0 + ($1["percent"] as? Double ?? 0) }, 100, accuracy: 1e-6)
        }
    }

    func testJSONLinesAndCSV() throws {
        let arguments = ["--model", "yolo26n", "--repetitions", "2", "--no-per-layer"] + short
        let lines = try bench(arguments + ["--output", "jsonl"])
        XCTAssertEqual(lines.status, 0, lines.stderr)
        let objects = lines.stdout.split(separator: "\n").map {
            try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
        }
        XCTAssertEqual(objects.map { $0?["repetition"] as? Int }, [1, 2], lines.stdout)
        XCTAssertTrue(objects.allSatisfy { $0?["layers"] == nil }, "--no-per-layer")

        let csv = try bench(arguments + ["--output", "csv"])
        XCTAssertEqual(csv.status, 0, csv.stderr)
        let rows = csv.stdout.split(separator: "\n").map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        XCTAssertEqual(rows.count, 3, "a header and one row per run: \(csv.stdout)")
        let header = rows[0].map(String.init)
        for column in ["model", "imgsz", "threads", "iters", "median_ms", "mean_ms", "sd_ms", "p10_ms", "p90_ms",
                       "gflop", "peak_rss_mb", "build", "cpu", "timestamp"] {
            XCTAssertTrue(header.contains(column), "missing column \(column)")
        }
        for row in rows.dropFirst() {
            XCTAssertEqual(row.count, header.count, "\(row)")
            XCTAssertNotNil(Double(String(row[header.firstIndex(of: "median_ms")!])), "\(row)")
        }
    }

    /// The instrumented pass times the same work as the uninstrumented one: the layers' medians
    /// add up to the whole-model median. On a shared machine one run can be disturbed, so the
    /// check passes if any of three runs agrees within 15 %.
    func testLayersAddUpToWholeModel() throws {
        var ratios = [Double]()
        for _ in 0..<3 {
            let run = try XCTUnwrap(try benchJSON(["--model", "yolo26n", "--iters", "8", "--warmup", "1", "--imgsz",
                                                   "320", "--threads", "1"]).first)
            let median = try XCTUnwrap((run["latency_ms"] as? [String: Any])?["median"] as? Double)
            let layers = try XCTUnwrap(run["layers"] as? [[String: Any]])
            ratios.append(layers.reduce(0) { $0 + ($1["ms"] as? Double ?? 0) } / median)
            if abs(ratios.last! - 1) <= 0.15 { return }
        }
        XCTFail("sum of layer medians / whole-model median: \(ratios)")
    }

    /// `yolo-bench conv`: a row per shape and thread count; malformed shapes are one-line errors.
    func testConvTimesEachShape() throws {
        let result = try bench(["conv", "--shapes", "16x20x20:8:3:2,8x9x9:8:3:1:8,32x7x7:16:1:1", "--threads", "1,2",
                                "--iters", "2"])
        XCTAssertEqual(result.status, 0, result.stderr)
        let rows = result.stdout.split(separator: "\n").filter { $0.hasPrefix("| ") && !$0.hasPrefix("| input") }
        XCTAssertEqual(rows.count, 6, result.stdout)
        XCTAssertTrue(rows[0].hasPrefix("| 16×20×20 | 8×10×10 | 3 | 2 | 1 | fp32 | 1 |"), String(rows[0]))
        let int8 = try bench(["conv", "--shapes", "16x20x20:8:3:2", "--threads", "1", "--iters", "2", "--precision", "int8"])
        XCTAssertTrue(int8.stdout.contains("| 16×20×20 | 8×10×10 | 3 | 2 | 1 | int8 | 1 |"), int8.stdout + int8.stderr)
        let grouped = try bench(["conv", "--shapes", "8x9x9:8:3:1:8", "--precision", "int8"])
        XCTAssertTrue(grouped.stderr.contains("ungrouped convolutions only"), grouped.stderr)
        for (shapes, message) in [("16x20:8:3:1", "is not CinxHxW"), ("6x9x9:8:3:1:4", "multiples of the groups"),
                                  ("4096x4096x8:8:1:1", "2^26")] {
            let bad = try bench(["conv", "--shapes", shapes])
            XCTAssertNotEqual(bad.status, 0, shapes)
            XCTAssertTrue(bad.stderr.contains(message), "\(shapes): \(bad.stderr)")
            XCTAssertEqual(bad.stdout, "", shapes)
        }
    }

    /// `--precision int8` reaches the record and the table; a bad value is an argument error.
    func testPrecision() throws {
        let runs = try benchJSON(["--model", "yolo26n", "--precision", "int8", "--no-per-layer"] + short)
        XCTAssertEqual(runs.map { $0["precision"] as? String }, ["int8"])
        let table = try bench(["--model", "yolo26n", "--precision", "int8", "--no-per-layer"] + short)
        XCTAssertTrue(table.stdout.contains("| yolo26n | int8 |"), table.stdout)
        let bad = try bench(["--model", "yolo26n", "--precision", "fp16"] + short)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("fp16"), bad.stderr)
    }

    /// `--paced` runs the passes each line of standard input asks for, one line of milliseconds
    /// each, and stops at a line that is not "THREADS PASSES".
    func testPacedRunsWhatEachLineAsks() throws {
        let requests = scratch.appendingPathComponent("requests")
        try Data("1 2\n2 3\n".utf8).write(to: requests)
        let ok = try bench(["--model", "yolo26n", "--imgsz", "64", "--paced"], stdin: requests)
        XCTAssertEqual(ok.status, 0, ok.stderr)
        let lines = ok.stdout.split(separator: "\n").map { $0.split(separator: " ").compactMap { Double($0) } }
        XCTAssertEqual(lines.map(\.count), [2, 3], ok.stdout)
        XCTAssertTrue(lines.joined().allSatisfy { $0 > 0 }, ok.stdout)
        try Data("1 1\n2 x 1\n".utf8).write(to: requests)
        let bad = try bench(["--model", "yolo26n", "--imgsz", "64", "--paced"], stdin: requests)
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertTrue(bad.stderr.contains("two positive integers, got \"2 x 1\""), bad.stderr)
        XCTAssertEqual(bad.stdout.split(separator: "\n").count, 1, "the first request's passes: \(bad.stdout)")
    }

    func testRandomWeightsWhenNoFileIsFound() throws {
        let result = try bench(["--model", "yolo11s", "--no-per-layer"] + short)
        XCTAssertEqual(result.status, 0, result.stderr)
        XCTAssertTrue(result.stdout.contains("random weights: latency does not depend on weight values"), result.stdout)
        XCTAssertTrue(result.stdout.contains("yolo11s (random)"), result.stdout)
        XCTAssertTrue(result.stdout.contains("| yolo11s | fp32 | 9.44 M |"), "fused yolo11s parameters: \(result.stdout)")
    }

    /// A name is looked up as `$YOLO_WEIGHTS_DIR/<name>.safetensors` before the built-in architectures.
    func testNameFindsTheWeightFile() throws {
        let file = try weightsFile("yolo26n.safetensors")
        let directory = scratch.appendingPathComponent("weights")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let link = directory.appendingPathComponent("yolo11n.safetensors")
        try FileManager.default.createSymbolicLink(at: link, withDestinationURL: file)
        let run = try XCTUnwrap(try benchJSON(["--model", "yolo11n", "--no-per-layer"] + short, weights: directory).first)
        XCTAssertEqual(run["weights"] as? String, link.path)
        XCTAssertEqual(run["parameters"] as? Int, 2_408_932, "the file's yolo26n graph, not the yolo11n architecture")
    }

    /// `--source` times every stage of YOLOCore's prediction on the letterboxed image.
    func testSourceTimesEveryStage() throws {
        let weights = try weightsFile("yolo26n.safetensors"), image = try sharedFile("images/bus.jpg")
        let run = try XCTUnwrap(try benchJSON(["--model", weights.path, "--source", image.path, "--no-per-layer"] + short)
            .first)
        let pipeline = try XCTUnwrap(run["pipeline"] as? [String: Any])
        XCTAssertEqual(pipeline["input_shape"] as? [Int], [1, 3, 64, 64])
        for stage in ["decode", "preprocess", "inference", "postprocess"] {
            XCTAssertEqual(((pipeline[stage] as? [String: Any])?["samples"] as? [Double])?.count, 3, stage)
        }
    }
}

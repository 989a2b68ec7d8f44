import ArgumentParser
import Foundation
import YOLOCore

/// `yolo solutions`: Ultralytics' solutions on a tracked video or stream: counting across a line
/// or through a polygon, objects per region, speeds, queues, a tracking zone and a heat map,
/// with per-frame records as JSON, crossing events as CSV and an annotated video.
struct Solutions: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Count, measure and map tracked objects in a video or stream, as Ultralytics' solutions.",
        discussion: """
        count: objects crossing a line (2 points) or passing through a polygon, in and out; region: \
        objects in each named polygon; speed: km/h per track; queue: objects in a polygon; trackzone: \
        tracks only inside a polygon; heatmap: where objects went (and counts, with --region).
        """)

    enum Kind: String, ExpressibleByArgument, CaseIterable {
        case count, region, speed, trackzone, queue, heatmap
    }

    @Argument(help: "count, region, speed, trackzone, queue or heatmap.")
    var solution: Kind

    @Option(help: "A video file or stream URL (rtsp://, http://), decoded by ffmpeg.")
    var source: String

    @Option(help: ArgumentHelp(
        "The region as x1,y1,x2,y2[,…] in frame pixels; for region, name=x1,y1,… and repeatable.",
        discussion: """
        Defaults as Ultralytics: count and queue (10,200)-(540,180) as a polygon, trackzone \
        (75,75)-(565,285), region one such polygon named Region#01, heatmap none (no counting).
        """))
    var region: [String] = []

    @Option(help: "Model name, .pt or .safetensors path, or http(s) URL.")
    var model = "yolo26n"

    @Option(help: "A tracker name (tracktrack, Ultralytics' default for solutions; bytetrack, botsort, …) or a tracker YAML file.")
    var tracker = "tracktrack"

    @Option(help: "Minimum confidence, 0…1.")
    var conf: Float = 0.25

    @Option(help: "NMS IoU threshold, 0…1 (legacy models).")
    var iou: Float = 0.7

    @Option(help: "Keep only these class indices, comma-separated.")
    var classes: String?

    @Option(help: "Long side of the network input.")
    var imgsz = 640

    @Option(help: "Threads the kernels use (default: YOLO_NUM_THREADS, else one per core).")
    var threads: Int?

    @Option(name: .customLong("meter-per-pixel"), help: "speed: metres per pixel of the scene.")
    var meterPerPixel = 0.05

    @Option(help: "speed: frames per second of the source (default: the video's rate, else 30).")
    var fps: Double?

    @Option(name: .customLong("max-speed"), help: "speed: the highest speed reported, km/h.")
    var maxSpeed = 120.0

    @Option(help: "heatmap: heat kept from one frame to the next, (0, 1]; 1 keeps it all, as Ultralytics.")
    var decay: Float = 1

    @Flag(help: "Save the annotated video as H.264 MP4 in runs/solutions/exp….")
    var save = false

    @Option(name: .customLong("save-json"), help: "Write one record per frame to this JSON file (an array), or - for JSON lines on stdout.")
    var saveJSON: String?

    @Flag(help: "Write the per-frame records as JSON lines on stdout (as --save-json -); messages go to stderr.")
    var stream = false

    @Option(name: .customLong("save-csv"), help: "count, heatmap with --region: write each counted crossing to this CSV file (frame, id, class, name, direction).")
    var saveCSV: String?

    @Flag(help: "No progress line: only the summary.")
    var quiet = false

    @Option(help: "Folder of the runs: runs/solutions by default; an absolute path, or a relative one inside runs/solutions.")
    var project: String?

    @Option(help: "Run name inside the project folder; exp, exp-2, … when taken, as Ultralytics names them.")
    var name = "exp"

    func run() async throws {
        do {
            try await solve()
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure(error)
        }
    }

    private func solve() async throws {
        if stream, let saveJSON, saveJSON != "-" {
            throw CommandFailure(message: "--stream writes JSON to stdout: drop --save-json \(saveJSON) or --stream")
        }
        if saveCSV != nil, solution != .count, !(solution == .heatmap && !region.isEmpty) {
            throw CommandFailure(message: "--save-csv writes counted crossings: use it with count, or heatmap with --region")
        }
        var config = try YOLOConfiguration.fromEnvironment()
        config.confidenceThreshold = conf
        config.iouThreshold = iou
        config.imageSize = imgsz
        config.threads = threads ?? config.threads
        config.classes = try classes.map { list in
            try list.split(separator: ",").map {
                guard let c = Int($0.trimmingCharacters(in: .whitespaces)) else {
                    throw YOLOError.invalidConfiguration(field: "classes", value: list, reason: "not a list of integers")
                }
                return c
            }
        }
        let trackerConfiguration = try TrackerConfiguration(named: tracker)
        _ = try makeSolver(frameRate: nil)  // bad regions and arguments fail before the model loads
        let url = source.contains("://") ? URL(string: source) : URL(fileURLWithPath: source)
        guard let url, url.isFileURL ? FileManager.default.fileExists(atPath: url.path) : true else {
            throw CommandFailure(message: "source \(source) does not exist")
        }
        let yolo = try await YOLO(model, configuration: config)
        let session = try YOLOSession(model: yolo, source: .video(url))
        defer { session.stop() }
        var solver = try makeSolver(frameRate: session.frameRate)
        if case let .trackzone(zone, _) = solver { session.frameTransform = { zone.masked($0) } }

        let json = try (stream ? "-" : saveJSON).map { try JSONStream(OutputFile($0, option: "--save-json")) }
        let csv = try saveCSV.map { try OutputFile($0, option: "--save-csv") }
        let saveDirectory = save ? try makeRunDirectory(project: project, task: "solutions", name: name, existOK: false) : nil
        let log: (String) -> Void = json?.file.isStdout == true
            ? { FileHandle.standardError.write(Data(($0 + "\n").utf8)) } : { print($0) }
        let stem = url.deletingPathExtension().lastPathComponent
        var objectTracker = ObjectTracker(trackerConfiguration)
        var writer: VideoWriter?
        var frames = 0
        do {
            try csv?.write(CountEvent.csvHeader + "\n")
            for await result in session.results {
                frames += 1
                let tracked = try objectTracker.update(result)
                let (record, events) = solver.update(tracked, retiredIDs: objectTracker.removedTracks.map(\.id))
                try json?.append(record)
                try csv?.write(events.map(\.csvLine).joined())
                try csv?.flush()
                if let saveDirectory {
                    let annotated = try solver.annotated(tracked)
                    if writer == nil {
                        writer = try VideoWriter(url: saveDirectory.appendingPathComponent(stem + ".mp4"), width: annotated.width,
                                                 height: annotated.height, frameRate: session.frameRate ?? 30)
                    }
                    try writer?.write(annotated)
                }
                if !quiet, isatty(STDERR_FILENO) == 1 {
                    FileHandle.standardError.write(Data("\r\u{1B}[K\(stem): frame \(frames)/\(session.frameCount.map(String.init) ?? "?")".utf8))
                }
            }
            if !quiet, isatty(STDERR_FILENO) == 1 { FileHandle.standardError.write(Data("\n".utf8)) }
            try writer?.finish()
            try json?.close()
            try csv?.flush()
        } catch {
            try? json?.close()
            try? csv?.flush()
            throw error
        }
        if let error = session.error { throw CommandFailure(message: "\(source) stopped after \(frames) frames: \(error.localizedDescription)") }
        log("\(frames) frames, \(solver.summary)")
        if let saveJSON, saveJSON != "-" { log("Results saved to \(saveJSON)") }
        if let saveCSV { log("Results saved to \(saveCSV)") }
        if let saveDirectory { log("Results saved to \(saveDirectory.path)") }
    }

    /// The solution with its region(s) from `--region`, or Ultralytics' defaults.
    private func makeSolver(frameRate: Double?) throws -> Solver {
        let defaultRegion = try SolutionRegion([[10, 200], [540, 200], [540, 180], [10, 180]])
        if solution != .region, region.count > 1 {
            throw CommandFailure(message: "\(solution.rawValue) takes one --region; several named ones are for region")
        }
        let single = try solution == .region ? nil : region.first.map(SolutionRegion.init(parsing:))
        switch solution {
        case .count: return .count(ObjectCounter(region: single ?? defaultRegion))
        case .queue: return .queue(try QueueManager(region: single ?? defaultRegion), peak: 0)
        case .trackzone: return .trackzone(try TrackZone(region: single), peak: 0)
        case .heatmap: return .heatmap(try Heatmap(region: single, decay: decay), peak: 0)
        case .speed:
            guard region.isEmpty else { throw CommandFailure(message: "speed takes no --region") }
            return .speed(try SpeedEstimator(metersPerPixel: meterPerPixel, fps: fps ?? frameRate ?? 30, maxSpeed: maxSpeed), fastest: nil)
        case .region:
            let named = try (region.isEmpty ? ["Region#01=" + defaultRegion.points.map { "\($0.x),\($0.y)" }.joined(separator: ",")] : region)
                .enumerated().map { i, text in
                    let parts = text.split(separator: "=", maxSplits: 1).map(String.init)
                    return parts.count == 2 ? (parts[0], try SolutionRegion(parsing: parts[1]))
                        : (String(format: "Region#%02d", i + 1), try SolutionRegion(parsing: text))
                }
            return .region(try RegionCounter(regions: named), peak: [:])
        }
    }
}

/// A heat map's record without a region to count in.
private struct Tracks: Encodable {
    var frame: Int?, tracks: Int
}

/// One solution's state, what it records per frame and what the summary says.
private enum Solver {
    case count(ObjectCounter)
    case region(RegionCounter, peak: [String: Int])
    case speed(SpeedEstimator, fastest: Int?)
    case trackzone(TrackZone, peak: Int)
    case queue(QueueManager, peak: Int)
    case heatmap(Heatmap, peak: Int)

    /// The frame's record for JSON, and the crossings counted in it.
    mutating func update(_ results: Results, retiredIDs: [Int]) -> (any Encodable, [CountEvent]) {
        switch self {
        case var .count(counter):
            let counts = counter.update(results, retiredIDs: retiredIDs)
            self = .count(counter)
            return (counts, counts.events)
        case .region(var counter, var peak):
            let counts = counter.update(results)
            peak.merge(counts.regions, uniquingKeysWith: max)
            self = .region(counter, peak: peak)
            return (counts, [])
        case .speed(var estimator, let fastest):
            let speeds = estimator.update(results, retiredIDs: retiredIDs)
            self = .speed(estimator, fastest: ([fastest].compactMap { $0 } + speeds.speeds.values).max())
            return (speeds, [])
        case .trackzone(var zone, let peak):
            let tracks = zone.update(results)
            self = .trackzone(zone, peak: max(peak, tracks.ids.count))
            return (tracks, [])
        case .queue(var queue, let peak):
            let counts = queue.update(results, retiredIDs: retiredIDs)
            self = .queue(queue, peak: max(peak, counts.queue))
            return (counts, [])
        case .heatmap(var heatmap, let peak):
            let counts = heatmap.update(results, retiredIDs: retiredIDs)
            let tracks = results.boxes.filter { $0.id != nil }.count
            self = .heatmap(heatmap, peak: max(peak, tracks))
            guard let counts else { return (Tracks(frame: results.frame, tracks: tracks), []) }
            return (counts, counts.events)
        }
    }

    func annotated(_ results: Results) throws -> Image {
        switch self {
        case let .count(counter): try counter.annotated(results)
        case let .region(counter, _): try counter.annotated(results)
        case let .speed(estimator, _): try estimator.annotated(results)
        case let .trackzone(zone, _): try zone.annotated(results)
        case let .queue(queue, _): try queue.annotated(results)
        case let .heatmap(heatmap, _): try heatmap.annotated(results)
        }
    }

    /// The totals, Ultralytics' way of naming them.
    var summary: String {
        func counted(_ counts: ObjectCounter.Counts) -> String {
            "in \(counts.in), out \(counts.out)" + (counts.classwise.isEmpty ? "" : " ("
                + counts.classwise.sorted { $0.key < $1.key }.map { "\($0.key): IN \($0.value.in) OUT \($0.value.out)" }.joined(separator: ", ") + ")")
        }
        switch self {
        case let .count(counter): return counted(counter.counts)
        case let .region(counter, peak):
            return "most objects at once: " + counter.regions.map { "\($0.name) \(peak[$0.name] ?? 0)" }.joined(separator: ", ")
        case let .speed(_, fastest): return fastest.map { "fastest \($0) km/h" } ?? "no speed measured"
        case let .trackzone(_, peak): return "most tracks in the zone at once \(peak)"
        case let .queue(_, peak): return "longest queue \(peak)"
        case let .heatmap(heatmap, peak):
            return "most tracks at once \(peak)" + (heatmap.counter.map { ", " + counted($0.counts) } ?? "")
        }
    }
}

import ArgumentParser
import Foundation
import Synchronization
import Tensor
import YOLOCore

/// `yolo predict`: a model's results (boxes, masks, keypoints, rotated boxes or classes, by the
/// model's task) for images, videos, streams or raw frames, printed like Ultralytics and
/// optionally saved as annotated images and videos, label files, JSON and CSV.
struct Predict: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Run a model on images, videos, streams or raw frames: detect, segment, pose, obb or classify, as the model was trained.")

    @OptionGroup var options: PredictOptions

    func run() async throws { try await options.run(tracker: nil) }
}

/// `yolo track`: `yolo predict` with boxes carrying track IDs across the frames of each video or
/// stream, and across the images of the run, as Ultralytics' `model.track(persist=True)`.
struct Track: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Track objects across video frames or a sequence of images (detect, segment, pose and obb models).")

    @OptionGroup var options: PredictOptions

    @Option(help: "bytetrack, botsort (without camera-motion compensation), tracktrack, ocsort, fasttrack, deepocsort, spatial or a tracker YAML file.")
    var tracker = "bytetrack"

    func run() async throws {
        let configuration: TrackerConfiguration
        do {
            configuration = try TrackerConfiguration(named: tracker)
        } catch {
            throw CommandFailure(error)
        }
        try await options.run(tracker: configuration)
    }
}

/// What `yolo predict` and `yolo track` share: the source, the model's settings and the outputs.
struct PredictOptions: ParsableArguments {
    @Option(help: "Model name (searched in YOLO_WEIGHTS_DIR, Weights/, the cache; official names downloaded), .pt or .safetensors path, or http(s) URL.")
    var model: String = "yolo26n"

    @Option(help: ArgumentHelp("The task expected of the model: detect, segment, pose, obb or classify.",
                               discussion: "Default: the model's own. Another task is an error, except detect from a segment or pose model (boxes only)."))
    var task: String?

    @Option(help: ArgumentHelp(
        "An image or video file, a folder, a glob pattern such as 'images/*.jpg', a stream URL, a camera (0 or /dev/video0), a .streams list, or - for raw frames.",
        discussion: """
        Videos are files with Ultralytics' video extensions (mp4, mkv, avi, mov, webm, gif, …) and URLs \
        such as rtsp://, http://, decoded by ffmpeg. An http(s) URL of an image (its extension, or its \
        Content-Type when it has no media extension) is downloaded and predicted as an image. Live sources \
        (rtsp, rtmp, tcp, udp, srt URLs, other http(s) URLs without a media extension, cameras) deliver their \
        newest frame and are reconnected when lost. \
        A .streams file lists sources, one a line, run side by side. - reads raw BGR24 frames of --frame-size from stdin.
        """))
    var source: String

    @Option(name: .customLong("frame-size"), help: "Width x height of the raw frames read with --source -, e.g. 640x360; asked of a camera.")
    var frameSize: String?

    @Option(help: "Frames per second asked of a camera.")
    var fps: Double?

    @Flag(name: .customLong("stream-buffer"), help: "Keep every frame of a live source, even when inference falls behind (default: the newest frame, stale ones dropped).")
    var streamBuffer = false

    @Option(name: .customLong("stream-timeout"), help: "Seconds a source may send nothing before a live one is reconnected (and any one fails to open).")
    var streamTimeout: Double = 10

    @Option(help: "Failed attempts in a row to reconnect a lost live source before the run ends (0: never reconnect).")
    var reconnect: Int = 5

    @Option(name: .customLong("vid-stride"), help: "Predict every N-th video frame only.")
    var vidStride: Int = 1

    @Option(help: "Minimum confidence, 0…1 (default 0.25; 0.1 for track, as Ultralytics).")
    var conf: Float?

    @Option(help: "NMS IoU threshold, 0…1 (legacy models).")
    var iou: Float = 0.7

    @Option(name: .customLong("max-det"), help: "Most detections per image.")
    var maxDet: Int = 300

    @Option(help: "Keep only these class indices, comma-separated.")
    var classes: String?

    @Option(help: "Long side of the network input, or HEIGHT,WIDTH of the field the image is fitted into (default: the model's training size).")
    var imgsz: ImageSizeArgument?

    @Flag(name: .customLong("agnostic-nms"), help: "NMS across classes instead of per class (legacy models).")
    var agnosticNMS = false

    @Option(help: "Threads the kernels use (default: YOLO_NUM_THREADS, else one per core).")
    var threads: Int?

    @Option(help: "The convolutions' arithmetic: fp32 (PyTorch's results) or int8 (faster, close to fp32).")
    var precision: YOLOPrecision = .fp32

    @Flag(help: "Save annotated images, and videos as H.264 MP4 at the source's frame rate over --vid-stride (30 for streams).")
    var save = false

    @Flag(name: .customLong("save-txt"), help: ArgumentHelp(
        "Save label files in Ultralytics' formats, coordinates normalized.",
        discussion: """
        detect: cls cx cy w h; segment: cls x1 y1 x2 y2 … (outline); pose: cls cx cy w h kx ky kv …; \
        obb: cls x1 y1 x2 y2 x3 y3 x4 y4 (corners); classify: "conf name" for the top 5. A video's \
        frames get <stem>_<n>.txt, n counting predicted frames from 1.
        """))
    var saveTxt = false

    @Flag(name: .customLong("save-conf"), help: "End each --save-txt line with the confidence (before a track ID).")
    var saveConf = false

    @Flag(name: .customLong("save-crop"), help: "Save each box's region as crops/<class>/<stem>.jpg (<stem>-2.jpg, … for more), as Ultralytics cuts them.")
    var saveCrop = false

    @Flag(name: .customLong("save-frames"), help: "Save each annotated frame of a video or stream as <stem>_frames/<stem>_<n>.jpg.")
    var saveFrames = false

    @Option(name: .customLong("line-width"), help: "Box outline width in pixels, 0.5…3 (default: from the image size).")
    var lineWidth: Double?

    @Flag(exclusivity: .chooseLast) var labelsShown = LabelsShown.showLabels
    @Flag(exclusivity: .chooseLast) var confShown = ConfShown.showConf
    @Flag(exclusivity: .chooseLast) var boxesShown = BoxesShown.showBoxes

    @Option(name: .customLong("save-json"), help: "Write all results to this JSON file (an array, written as results finish), or - for JSON lines on stdout.")
    var saveJSON: String?

    @Flag(help: "Write results as JSON lines on stdout as they finish (as --save-json -); messages go to stderr.")
    var stream = false

    @Option(name: .customLong("save-csv"), help: "Write one CSV row per detection to this file: image, frame, class, name, conf, x1, y1, x2, y2 (or x, y, w, h), id, source, time (seconds into a video, ISO 8601 for a live source).")
    var saveCSV: String?

    @Option(name: .customLong("csv-boxes"), help: "Boxes in --save-csv rows: xyxy (corners) or xywh (centre and size).")
    var csvBoxes: CSVBoxFormat = .xyxy

    @Flag(help: "No line per image or frame and no progress line: only warnings and the summary.")
    var quiet = false

    @Option(help: ArgumentHelp(
        "Predict shard I of N (0 ≤ I < N): every N-th input of the sorted list from offset I.",
        discussion: "N machines (a Kubernetes Indexed Job's JOB_COMPLETION_INDEX, a Slurm array) share one folder, each writing its own --save-json."))
    var shard: Shard?

    @OptionGroup var runFolder: RunFolderOptions

    /// What `--source` names, one item of the run: an image (a file or an http(s) URL), or frames
    /// named `name` in messages.
    private enum Input {
        case image(URL)
        /// One source, or a `.streams` list's, run side by side.
        case frames([(source: YOLOSession.Source, name: String)])

        var isImage: Bool { if case .image = self { true } else { false } }
        var sources: Int { if case let .frames(list) = self { list.count } else { 0 } }
    }

    /// Runs the command; SIGINT or SIGTERM stops it as `Interruption` says.
    func run(tracker: TrackerConfiguration?) async throws {
        let work = Task { try await predict(tracker: tracker) }
        let interruption = Interruption { work.cancel() }
        let outcome = await work.result
        guard let signal = interruption.received else { return try outcome.get() }
        if case let .failure(error) = outcome { FileHandle.standardError.write(Data("Error: \(error)\n".utf8)) }
        throw ExitCode(128 + signal)
    }

    /// The run, to its end or its cancellation: every input is tried, each failure reported, and
    /// the JSON and CSV end well formed whatever happens once they are open. Throws when an input
    /// or a write failed.
    private func predict(tracker: TrackerConfiguration?) async throws {
        do {
            var config = try YOLOConfiguration.fromEnvironment()
            config.confidenceThreshold = conf ?? (tracker == nil ? 0.25 : 0.1)
            config.iouThreshold = iou
            config.maxDetections = maxDet
            if let sides = imgsz?.sides {
                if sides.count == 1 { config.imageSize = sides[0] } else { config.imageShape = sides }
            }
            config.agnosticNMS = agnosticNMS
            config.lineWidth = lineWidth
            config.threads = threads ?? config.threads
            if let classes {
                config.classes = try classes.split(separator: ",").map {
                    guard let c = Int($0.trimmingCharacters(in: .whitespaces)) else {
                        throw YOLOError.invalidConfiguration(field: "classes", value: classes, reason: "not a list of integers")
                    }
                    return c
                }
            }
            guard vidStride >= 1 else { throw CommandFailure(message: "--vid-stride \(vidStride) must be at least 1") }
            let requested = try task.map { name in
                guard let task = YOLOTask(rawValue: name) else {
                    throw CommandFailure(message: "unknown task '\(name)'; use detect, segment, pose, obb or classify")
                }
                return task
            }
            if stream, let saveJSON, saveJSON != "-" {
                throw CommandFailure(message: "--stream writes JSON to stdout: drop --save-json \(saveJSON) or --stream")
            }
            let inputs = try shard.map { shard in try self.inputs().enumerated().filter { $0.offset % shard.count == shard.index }.map(\.element) }
                ?? self.inputs()
            // Output files open first: a path that cannot be written fails before any inference.
            let json = try (stream ? "-" : saveJSON).map { try JSONStream(OutputFile($0, option: "--save-json")) }
            let csv = try saveCSV.map { try OutputFile($0, option: "--save-csv") }
            if let json, let csv, json.file.isSameFile(as: csv) {
                throw CommandFailure(message: "--save-json \(json.file.path) and --save-csv \(csv.path) are the same file: give each its own")
            }
            let run: Run
            do {
                try csv?.write(Results.csvHeader(boxes: csvBoxes) + "\n")
                run = try await predict(inputs, config: config, task: requested, tracker: tracker, json: json, csv: csv)
            } catch {
                // Whatever ended the run, the JSON array is closed and the CSV has whole rows.
                try? json?.close()
                try? csv?.flush()
                throw error
            }
            try json?.close()
            try csv?.flush()
            // A lone input that failed before any result has its error alone; one that failed
            // later (a stream lost for good) has the summary of what it gave first.
            if inputs.count > 1 || run.failures.isEmpty || run.done > 0 {
                run.summary()
                if let saveJSON, saveJSON != "-" { run.log.print("Results saved to \(saveJSON)") }
                if let saveCSV { run.log.print("Results saved to \(saveCSV)") }
                if let directory = run.saveDirectory { run.log.print("Results saved to \(directory.path)") }
            }
            if inputs.count == 1, let failure = run.failures.first { throw CommandFailure(message: failure) }
            guard run.failures.isEmpty else {
                throw CommandFailure(message: "\(run.failures.count) of the \(inputs.count) inputs failed (see the warnings above)")
            }
        } catch let error as CommandFailure {
            throw error
        } catch {
            throw CommandFailure(error)
        }
    }

    /// Predicts `inputs` in order and writes their results. An input that cannot be read, or
    /// whose images, labels or video cannot be written, is reported and the run goes on; a
    /// failure to write the JSON or CSV ends it. Cancellation ends it after the current image
    /// or frame.
    private func predict(_ inputs: [Input], config: YOLOConfiguration, task requested: YOLOTask?, tracker: TrackerConfiguration?,
                         json: JSONStream?, csv: OutputFile?) async throws -> Run {
        let yolo = try await YOLO(model, configuration: config, precision: precision)
        let task = requested ?? yolo.task
        if saveCrop, task == .classify {
            throw CommandFailure(message: "--save-crop cuts boxes: classify results have none")
        }
        // Frames are saved from videos and streams only.
        let savesFrames = saveFrames && !inputs.allSatisfy(\.isImage)
        let saveDirectory = save || saveTxt || saveCrop || savesFrames
            ? try runFolder.make(task: task.rawValue, verb: tracker == nil ? "predict" : "track") : nil
        let images = inputs.filter(\.isImage).count
        var run = Run(log: json?.file.isStdout == true ? .standardError : .standardOutput, quiet: quiet,
                      images: images, videos: inputs.map(\.sources).reduce(0, +), saveDirectory: saveDirectory)
        // Images are tracked as one sequence; each video or stream gets a tracker of its own.
        var imageTracker = tracker.map { ObjectTracker($0) }
        // Each result is written as it completes and dropped: memory stays that of one frame.
        let write = { (result: Results, labelStem: String) throws in
            try json?.append(result)
            try csv?.write(result.csv(boxes: csvBoxes))
            try csv?.flush()
            if saveTxt, let saveDirectory { try writeLabels(result, named: labelStem, in: saveDirectory) }
            if saveCrop, let saveDirectory { try writeCrops(result, named: labelStem, in: saveDirectory) }
        }
        for (i, input) in inputs.enumerated() {
            if Task.isCancelled { break }
            let label = "\(input.isImage ? "image" : "video") \(i + 1)/\(inputs.count)"
            let before = run.done
            do {
                switch input {
                case let .image(url):
                    let name = url.isFileURL ? url.path : url.absoluteString
                    var result = try await yolo.predict(name, task: requested)
                    if imageTracker != nil { result = try imageTracker!.update(result) }
                    run.count(result)
                    run.say("\(label) \(name): \(result.inputShape[2])x\(result.inputShape[3]) "
                            + result.summary + String(format: "%.1fms", result.speed.inference))
                    let stem = url.deletingPathExtension().lastPathComponent
                    try write(result, stem)
                    // An image served at a URL without extension is saved as JPEG.
                    let saved = url.pathExtension.isEmpty ? stem + ".jpg" : url.lastPathComponent
                    if save, let saveDirectory { try annotate(result).write(to: saveDirectory.appendingPathComponent(saved)) }
                case let .frames(sources):
                    try await predictFrames(of: sources, label: label, yolo: yolo, task: requested, tracker: tracker,
                                            run: &run, saveDirectory: saveDirectory, write: write)
                }
            } catch let error as OutputFailure {
                throw error
            } catch where Task.isCancelled {
                break  // stopped by a signal: not the input's failure
            } catch {
                let message = "\(CommandFailure(error))"
                run.fail(inputs.count == 1 ? message : run.done > before ? "\(label) \(message)" : "\(label) skipped: \(message)")
            }
        }
        return run
    }

    /// Streams a video, a network stream, a camera or stdin through a session, or a `.streams`
    /// list's sources through a session each, side by side on the one model: each frame's result
    /// is written (with `source`, its line's index, for a list), annotated into `<stem>.mp4`
    /// (--save) and `<stem>_frames/<stem>_<n>.jpg` (--save-frames) in `saveDirectory`, then dropped.
    private func predictFrames(of sources: [(source: YOLOSession.Source, name: String)], label: String, yolo: YOLO, task: YOLOTask?,
                               tracker: TrackerConfiguration?, run: inout Run, saveDirectory: URL?,
                               write: (Results, String) throws -> Void) async throws {
        let policy = ReconnectPolicy(attempts: reconnect, timeout: streamTimeout) { event in
            FileHandle.standardError.write(Data(("reconnected to \(event.source) after " + String(format: "%.1f", event.outage)
                                                 + " s (\(event.reason))\n").utf8))
        }
        let sessions = try sources.map { try YOLOSession(model: yolo, source: $0.source, task: task, tracker: tracker, frameStride: vidStride,
                                                         dropsStaleFrames: !streamBuffer, reconnect: policy) }
        // A failed write leaves this input: its decoders stop at once.
        defer { sessions.forEach { $0.stop() } }
        // One stem per source; a list's sources that share one get their index too.
        let stems = sources.enumerated().map { i, entry in
            let stem = URL(fileURLWithPath: entry.name).deletingPathExtension().lastPathComponent
            let shared = sources.filter { URL(fileURLWithPath: $0.name).deletingPathExtension().lastPathComponent == stem }.count > 1
            return shared ? "\(stem)_\(i)" : stem
        }
        var progress = Progress(enabled: !quiet && isatty(STDERR_FILENO) == 1)
        var writers = [VideoWriter?](repeating: nil, count: sources.count)
        var predicted = [Int](repeating: 0, count: sources.count)
        let started = Date()
        var failure: (any Error)?
        // Each session is iterated in a task of its own and hands its results over one at a time.
        let handoff = Handoff(sources: sessions.count)
        // The session's tracking threshold gives way to the one the command chose; side by side,
        // the sources share the cores rather than each taking them all.
        var configuration = yolo.configuration
        if sessions.count > 1, threads == nil {
            configuration.threads = max(1, (configuration.threads ?? Parallel.width) / sessions.count)
        }
        await withTaskGroup(of: Void.self) { group in
            for (i, session) in sessions.enumerated() {
                session.configuration = configuration
                group.addTask {
                    for await result in session.results { await handoff.put(result, from: i) }
                    handoff.end()
                }
            }
            while let delivered = await handoff.next() {
                let i = delivered.source
                var result = delivered.result
                if failure != nil { continue }
                if sources.count > 1 { result.source = i }
                predicted[i] += 1
                run.count(result)
                let name = sources[i].name
                let frame = "frame \(predicted[i])/\(sessions[i].frameCount.map { String($0 / vidStride) } ?? "?")"
                let detail = "\(result.inputShape[2])x\(result.inputShape[3]) \(result.summary)" + String(format: "%.1fms", result.speed.inference)
                let source = sources.count > 1 ? "\(label) \(i + 1)/\(sources.count)" : label
                if progress.enabled {
                    let rate = Double(predicted.reduce(0, +)) / max(Date().timeIntervalSince(started), 1e-3)
                    progress.show("\(source) \(name): \(frame), " + String(format: "%.1f frames/s, ", rate) + detail)
                } else {
                    run.say("\(source) (\(frame)) \(name): \(detail)")
                }
                do {
                    let frameStem = "\(stems[i])_\(predicted[i])"
                    try write(result, frameStem)
                    if save || saveFrames, let saveDirectory {
                        let annotated = try annotate(result)
                        if save, writers[i] == nil {
                            writers[i] = try VideoWriter(url: saveDirectory.appendingPathComponent(stems[i] + ".mp4"), width: annotated.width,
                                                         height: annotated.height,
                                                         frameRate: max(1, (sessions[i].frameRate ?? 30) / Double(vidStride)))
                        }
                        try writers[i]?.write(annotated)
                        if saveFrames {
                            let frames = saveDirectory.appendingPathComponent(stems[i] + "_frames")
                            try FileManager.default.createDirectory(at: frames, withIntermediateDirectories: true)
                            try annotated.write(to: frames.appendingPathComponent(frameStem + ".jpg"))
                        }
                    }
                } catch {
                    failure = error
                    sessions.forEach { $0.stop() }
                }
            }
        }
        progress.end()
        if let failure { throw failure }
        for writer in writers { try writer?.finish() }
        for session in sessions where session.isLive { run.countLive(dropped: session.droppedFrames, reconnects: session.reconnects) }
        let failures = zip(sessions, sources).enumerated().compactMap { i, pair -> (any Error)? in
            guard let error = pair.0.error else { return nil }
            guard predicted[i] > 0 else { return error }
            return PartialSource(description: "\(pair.1.name) stopped after \(predicted[i]) frames: \(error.localizedDescription)")
        }
        if failures.count == 1 { throw failures[0] }
        if !failures.isEmpty {
            throw PartialSource(description: failures.map { ($0 as? LocalizedError)?.errorDescription ?? "\($0)" }.joined(separator: "; "))
        }
    }

    /// `--source` as the items of the run: stdin, a camera, a `.streams` list, an image or stream
    /// URL (`Image.isServed(at:)`), or files (a file, or a folder's or a pattern's images and videos in natural order,
    /// `MediaFiles`). Files with Ultralytics' image extensions that are not JPEG or PNG are items
    /// too, reported as skipped.
    private func inputs() throws -> [Input] {
        let size = try frameSize.map { frameSize in
            let sides = frameSize.lowercased().split(separator: "x", omittingEmptySubsequences: false).map { Int($0) }
            guard sides.count == 2, let width = sides[0], let height = sides[1] else {
                throw CommandFailure(message: "--frame-size \(frameSize) is not WIDTHxHEIGHT, e.g. 640x360")
            }
            return (width: width, height: height)
        }
        if source == "-" {
            guard let size else {
                throw CommandFailure(message: "--source - reads raw BGR24 frames: give their size with --frame-size WxH, e.g. 640x360")
            }
            return [.frames([(.stdin(width: size.width, height: size.height), name: "stdin")])]
        }
        if let camera = YOLOSession.Camera(source: source) {
            if let fps, !(fps > 0 && fps <= 1000) { throw CommandFailure(message: "--fps \(fps) is not in (0, 1000]") }
            return [.frames([(.camera(camera, frameSize: size, frameRate: fps), name: camera.path)])]
        }
        if let frameSize { throw CommandFailure(message: "--frame-size \(frameSize) applies to --source - and cameras only") }
        if let fps { throw CommandFailure(message: "--fps \(fps) applies to cameras only") }
        if source.lowercased().hasSuffix(".streams") {
            let text: String
            do {
                text = try String(contentsOfFile: source, encoding: .utf8)
            } catch {
                throw CommandFailure(message: "cannot read the list of sources \(source): \(error.localizedDescription)")
            }
            // As Ultralytics reads it: whitespace-separated entries, a byte-order mark ignored.
            let entries = text.replacingOccurrences(of: "\u{FEFF}", with: "").split(whereSeparator: \.isWhitespace).map(String.init)
            guard !entries.isEmpty else { throw CommandFailure(message: "\(source) lists no source: give one path or URL a line") }
            return [.frames(try entries.map { entry in
                if let camera = YOLOSession.Camera(source: entry) { return (.camera(camera), name: camera.path) }
                if entry.contains("://"), let url = URL(string: entry), url.scheme != nil, !url.isFileURL { return (.video(url), name: entry) }
                guard FileManager.default.fileExists(atPath: entry) else { throw CommandFailure(message: "\(source): source \(entry) does not exist") }
                return (.video(URL(fileURLWithPath: entry)), name: entry)
            })]
        }
        if source.contains("://"), let url = URL(string: source), url.scheme != nil, !url.isFileURL {
            return [Image.isServed(at: url) ? .image(url) : .frames([(.video(url), name: source)])]
        }
        let url = URL(fileURLWithPath: source)
        let files = try MediaFiles.expand(url, keeping: MediaFiles.imageExtensions.union(MediaFiles.videoExtensions),
                                          kind: "image or video")
        if files == [url] && !FileManager.default.fileExists(atPath: source) {
            throw CommandFailure(message: "source \(source) does not exist")
        }
        return files.map { file in
            MediaFiles.videoExtensions.contains(file.pathExtension.lowercased()) ? .frames([(.video(file), name: file.path)]) : .image(file)
        }
    }

    /// labels/<stem>.txt in Ultralytics' `save_txt` formats, numbers as `%g`: detect "cls cx cy
    /// w h"; segment "cls x1 y1 …" (the outline; objects whose outline has fewer than 3 points
    /// are left out); pose "cls cx cy w h kx ky kv …"; obb "cls x1 y1 … x4 y4"; then the
    /// confidence with --save-conf; classify "conf name" per top-5 class. No file when no line.
    private func writeLabels(_ result: Results, named stem: String, in directory: URL) throws {
        func g(_ v: Float) -> String { String(format: "%g", Double(v)) }
        func conf(_ v: Float) -> [String] { saveConf ? [g(v)] : [] }
        // A tracked box's ID ends its line, after the confidence, as Ultralytics writes it.
        func id(_ box: Box) -> [String] { box.id.map { [String($0)] } ?? [] }
        var lines = [String]()
        switch result.task {
        case .classify:
            if let probs = result.probs {
                lines = zip(probs.top5conf, probs.top5names).map { String(format: "%.2f", Double($0)) + " " + $1 }
            }
        case .obb:
            lines = result.obb.map { box in
                ([String(box.cls)] + box.xyxyxyxyn.flatMap { [$0.x, $0.y] }.map(g) + conf(box.conf)).joined(separator: " ")
            }
        case .segment:
            lines = zip(result.boxes, result.masks).compactMap { box, mask in
                let outline = mask.xyn
                guard outline.count >= 3 else { return nil }
                return ([String(box.cls)] + outline.flatMap { [$0.x, $0.y] }.map(g) + conf(box.conf) + id(box)).joined(separator: " ")
            }
        case .pose:
            lines = zip(result.boxes, result.keypoints).map { box, k in
                let points = k.xyn.indices.flatMap { i in [k.xyn[i].x, k.xyn[i].y] + (k.conf.count == k.xy.count ? [k.conf[i]] : []) }
                return ([String(box.cls)] + (box.xywhn + points).map(g) + conf(box.conf) + id(box)).joined(separator: " ")
            }
        case .detect:
            lines = result.boxes.map { box in ([String(box.cls)] + box.xywhn.map(g) + conf(box.conf) + id(box)).joined(separator: " ") }
        }

        guard !lines.isEmpty else { return }
        let labels = directory.appendingPathComponent("labels")
        try FileManager.default.createDirectory(at: labels, withIntermediateDirectories: true)
        try (lines.joined(separator: "\n") + "\n").write(
            to: labels.appendingPathComponent(stem + ".txt"), atomically: true, encoding: .utf8)
    }

    /// crops/<class name>/<stem>.jpg for each box, as Ultralytics' `save_crop` writes them: JPEG
    /// at quality 95 without chroma subsampling; a name taken (by an earlier box of the class,
    /// or an earlier run with --exist-ok) becomes <stem>-2.jpg, <stem>-3.jpg, ….
    private func writeCrops(_ result: Results, named stem: String, in directory: URL) throws {
        for crop in result.crops() {
            let folder = directory.appendingPathComponent("crops").appendingPathComponent(crop.name)
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            var file = folder.appendingPathComponent(stem + ".jpg")
            var n = 1
            while FileManager.default.fileExists(atPath: file.path) {
                n += 1
                file = folder.appendingPathComponent("\(stem)-\(n).jpg")
            }
            try crop.image.jpegData(quality: 95, subsampled: false).write(to: file)
        }
    }

    /// The result drawn as --line-width, --hide-labels, --hide-conf and --hide-boxes ask.
    private func annotate(_ result: Results) throws -> Image {
        try result.annotated(labels: labelsShown == .showLabels, conf: confShown == .showConf, boxes: boxesShown == .showBoxes)
    }
}

/// A text file written as results finish, or stdout for "-". Opened at once, so a path that
/// cannot be written fails before any inference; errors (`OutputFailure`) name the option.
final class OutputFile {
    let path: String
    private let option: String
    private let file: UnsafeMutablePointer<FILE>

    var isStdout: Bool { path == "-" }

    init(_ path: String, option: String) throws {
        (self.path, self.option) = (path, option)
        // stdout gets a FILE of its own: nothing else writes there while it carries results.
        guard let file = path == "-" ? fdopen(STDOUT_FILENO, "w") : fopen(path, "w") else {
            throw CommandFailure(message: "cannot write \(option) \(path): \(String(cString: strerror(errno)))")
        }
        self.file = file
    }

    deinit { if !isStdout { fclose(file) } }

    func write(_ text: String) throws {
        guard fputs(text, file) >= 0 else { throw failure() }
    }

    func flush() throws {
        guard fflush(file) == 0 else { throw failure() }
    }

    /// Both are one file (one device and inode): a path spelled twice, a link, stdout twice.
    func isSameFile(as other: OutputFile) -> Bool {
        var a = stat(), b = stat()
        return fstat(fileno(file), &a) == 0 && fstat(fileno(other.file), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino
    }

    private func failure() -> OutputFailure {
        OutputFailure(description: "cannot write \(option) \(path): \(String(cString: strerror(errno)))")
    }
}

/// The JSON or CSV file of the run could not be written: the run ends, as every later result
/// would be lost too.
struct OutputFailure: Error, CustomStringConvertible {
    let description: String
}

/// Results as JSON: an array in a file, or JSON lines on stdout, each flushed as it is written
/// so that another program reads them live and a stopped run loses none.
final class JSONStream {
    let file: OutputFile
    private var count = 0
    private let encoder = JSONEncoder()

    init(_ file: OutputFile) {
        self.file = file
        encoder.outputFormatting = file.isStdout ? [.sortedKeys] : [.prettyPrinted, .sortedKeys]
    }

    func append(_ value: some Encodable) throws {
        let text = String(decoding: try encoder.encode(value), as: UTF8.self)
        try file.write(file.isStdout ? text + "\n" : (count == 0 ? "[\n" : ",\n") + text)
        try file.flush()
        count += 1
    }

    func close() throws {
        if !file.isStdout { try file.write(count == 0 ? "[]\n" : "\n]\n") }
        try file.flush()
    }
}

/// A video or stream that failed after some of its frames were predicted and written.
private struct PartialSource: Error, CustomStringConvertible {
    let description: String
}

/// The run's counts and messages: lines per image or frame (unless quiet) to stdout, or to
/// stderr when stdout carries JSON lines.
private struct Run {
    enum Log {
        case standardOutput, standardError

        func print(_ line: String) {
            switch self {
            case .standardOutput: Swift.print(line)
            case .standardError: FileHandle.standardError.write(Data((line + "\n").utf8))
            }
        }
    }

    let log: Log
    let quiet: Bool
    /// Image and video items in the run.
    let images: Int, videos: Int
    /// Where annotated images, videos and labels go, when saved.
    let saveDirectory: URL?
    /// Images and frames predicted.
    var done = 0, frames = 0
    /// Live sources' stale frames dropped and reconnections, when there were live sources.
    var live: (dropped: Int, reconnects: Int)?
    /// What went wrong with each input that failed.
    var failures = [String]()
    var total = (preprocess: 0.0, inference: 0.0, postprocess: 0.0)

    mutating func count(_ result: Results) {
        done += 1
        if result.frame != nil { frames += 1 }
        total.preprocess += result.speed.preprocess
        total.inference += result.speed.inference
        total.postprocess += result.speed.postprocess
    }

    mutating func countLive(dropped: Int, reconnects: Int) {
        live = ((live?.dropped ?? 0) + dropped, (live?.reconnects ?? 0) + reconnects)
    }

    func say(_ line: String) {
        if !quiet { log.print(line) }
    }

    /// An input failed: reported on stderr at once when there are others, else by the command's
    /// error.
    mutating func fail(_ line: String) {
        failures.append(line)
        if images + videos > 1 { FileHandle.standardError.write(Data(("WARNING ⚠️ " + line + "\n").utf8)) }
    }

    func summary() {
        let n = Double(done)
        if done > 0 {
            log.print(String(format: "Speed: %.1fms preprocess, %.1fms inference, %.1fms postprocess per image",
                             total.preprocess / n, total.inference / n, total.postprocess / n))
        }
        let parts = (images > 0 || videos == 0 ? ["\(images) \(images == 1 ? "image" : "images")"] : [])
            + (videos > 0 ? ["\(videos) \(videos == 1 ? "video" : "videos") (\(frames) frames"
                + (live.map { ", \($0.dropped) dropped, \($0.reconnects) \($0.reconnects == 1 ? "reconnect" : "reconnects")" } ?? "") + ")"] : [])
        log.print((parts + ["\(failures.count) failed"]).joined(separator: ", "))
    }
}

/// SIGINT and SIGTERM end the run cleanly: the first calls `stop` (which cancels the run: the
/// current image or frame is finished and written, the JSON closed, the CSV flushed, the ffmpeg
/// and ffprobe children stopped) and is kept in `received` for the exit status, 128 + its number
/// (130, 143); a second exits at once with that status.
private final class Interruption: Sendable {
    private let first = Mutex<Int32?>(nil)

    init(stop: @escaping @Sendable () -> Void) {
        // A handler, not SIG_IGN (which ffmpeg and ffprobe would inherit), writes the number to a
        // pipe (async-signal-safe) for a thread of its own. Without a pipe (no file descriptor
        // left), signals keep their default action.
        guard signalPipe.read >= 0 else { return }
        for number in [SIGINT, SIGTERM] {
            signal(number) { number in
                var byte = UInt8(number)
                _ = write(signalPipe.write, &byte, 1)
            }
        }
        Thread.detachNewThread { [self] in
            var byte: UInt8 = 0
            while read(signalPipe.read, &byte, 1) == 1 {
                let number = Int32(byte)
                let isFirst = first.withLock { received in
                    guard received == nil else { return false }
                    received = number
                    return true
                }
                if isFirst { stop() } else { _exit(128 + number) }
            }
        }
    }

    var received: Int32? { first.withLock { $0 } }
}

/// The pipe from `Interruption`'s signal handler to its thread.
private let signalPipe: (read: Int32, write: Int32) = {
    var ends: [Int32] = [-1, -1]
    return pipe(&ends) == 0 ? (ends[0], ends[1]) : (-1, -1)
}()

/// One line on a terminal's stderr rewritten in place, at most 10 times a second.
private struct Progress {
    let enabled: Bool
    private var shown = false
    private var last = 0.0

    init(enabled: Bool) { self.enabled = enabled }

    mutating func show(_ line: String) {
        let now = Date().timeIntervalSinceReferenceDate
        guard enabled, now - last >= 0.1 else { return }
        last = now
        shown = true
        FileHandle.standardError.write(Data(("\r\u{1B}[K" + line).utf8))
    }

    mutating func end() {
        if shown { FileHandle.standardError.write(Data("\n".utf8)) }
        shown = false
    }
}

/// `--shard I/N`: the inputs whose place in the list is I modulo N.
struct Shard: ExpressibleByArgument {
    let index: Int, count: Int

    init?(argument: String) {
        let parts = argument.split(separator: "/", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard parts.count == 2, let index = parts[0], let count = parts[1], count > 0, (0..<count).contains(index) else { return nil }
        (self.index, self.count) = (index, count)
    }
}

/// `--imgsz`: one side, or Ultralytics' `[h, w]` written HEIGHT,WIDTH.
struct ImageSizeArgument: ExpressibleByArgument {
    let sides: [Int]

    init?(argument: String) {
        let sides = argument.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
        guard (1...2).contains(sides.count), sides.allSatisfy({ $0 != nil }) else { return nil }
        self.sides = sides.compactMap { $0 }
    }
}

/// `--show-labels` / `--hide-labels`, and so on: Ultralytics' `show_labels`, `show_conf` and
/// `show_boxes`, each either way, the last one given winning.
enum LabelsShown: EnumerableFlag {
    case showLabels, hideLabels

    static func help(for value: Self) -> ArgumentHelp? {
        value == .showLabels ? "Class names in the drawn labels." : "Labels without class names."
    }
}

enum ConfShown: EnumerableFlag {
    case showConf, hideConf

    static func help(for value: Self) -> ArgumentHelp? {
        value == .showConf ? "Confidences in the drawn labels." : "Labels without confidences."
    }
}

enum BoxesShown: EnumerableFlag {
    case showBoxes, hideBoxes

    static func help(for value: Self) -> ArgumentHelp? {
        value == .showBoxes ? "Draw boxes and their labels." : "Draw no boxes: masks, keypoints and classes only."
    }
}

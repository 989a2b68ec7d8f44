import Dispatch
import Foundation
import Synchronization

/// Why a session's source could not be opened or ended before its last frame.
public enum SourceError: Error, LocalizedError, Equatable {
    /// `ffmpeg` or `ffprobe` is not on `PATH`.
    case toolNotFound(tool: String, searched: String)
    /// The source could not be opened; `reason` is ffmpeg's own message.
    case cannotOpen(source: String, reason: String)
    /// The source ended after `frames` of the `expected` frames its container announced.
    case endedEarly(source: String, frames: Int, expected: Int, reason: String)
    /// Raw input ended inside frame `frame` (0-based): `bytes` of its `expected` bytes arrived.
    case partialFrame(source: String, frame: Int, bytes: Int, expected: Int)
    /// ffmpeg stopped with a failure status after delivering `frames` frames.
    case decodeFailed(source: String, frames: Int, status: Int32, reason: String)
    /// Reading the frames failed.
    case readFailed(source: String, reason: String)

    public var errorDescription: String? {
        switch self {
        case let .toolNotFound(tool, searched):
            "\(tool) not found on PATH (\(searched)): video sources need the Debian package ffmpeg (apt-get install ffmpeg)"
        case let .cannotOpen(source, reason):
            "cannot open \(source): \(reason)"
        case let .endedEarly(source, frames, expected, reason):
            "\(source) ended after \(frames) of its \(expected) frames: \(reason)"
        case let .partialFrame(source, frame, bytes, expected):
            "\(source) ended inside frame \(frame): \(bytes) of its \(expected) bytes arrived"
        case let .decodeFailed(source, frames, status, reason):
            "ffmpeg failed on \(source) after \(frames) frames (exit status \(status)): \(reason)"
        case let .readFailed(source, reason):
            "cannot read frames from \(source): \(reason)"
        }
    }
}

/// Packed BGR24 frames of one size read from a file descriptor: ffmpeg's output pipe or stdin.
struct FrameReader: Sendable {
    let fd: Int32
    let width: Int
    let height: Int
    /// Names the input in errors.
    let source: String

    /// Frame `index`, blocking until all its bytes arrive; nil when the input ends before it, or
    /// when `stopped()` is true before its first byte (asked as bytes arrive, and every 50 ms
    /// while the input is idle): a stopped session's reader takes no bytes that a later reader of
    /// the same input should get.
    func next(index: Int, stopped: () -> Bool = { false }) throws -> Image? {
        let size = width * height * 3
        var bytes = [UInt8](repeating: 0, count: size)
        var filled = 0
        while filled < size {
            if filled == 0 {
                var idle = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&idle, 1, 50)
                if ready < 0 && errno != EINTR {
                    throw SourceError.readFailed(source: source, reason: String(cString: strerror(errno)))
                }
                if stopped() { return nil }
                if ready <= 0 { continue }
            }
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + filled, size - filled) }
            if n > 0 {
                filled += n
            } else if n == 0 {
                break
            } else if errno != EINTR {
                throw SourceError.readFailed(source: source, reason: String(cString: strerror(errno)))
            }
        }
        guard filled > 0 else { return nil }
        guard filled == size else { throw SourceError.partialFrame(source: source, frame: index, bytes: filled, expected: size) }
        return try Image(pixels: bytes, width: width, height: height, format: .bgr)
    }
}

/// The last `limit` bytes a subprocess writes to a pipe (ffmpeg's messages, ffprobe's JSON), read
/// until the pipe closes: only the tail is kept, since a damaged stream can log without end.
final class MessageTail: Sendable {
    private let bytes = Mutex<[UInt8]>([])
    private let done = DispatchSemaphore(value: 0)

    init(_ pipe: Pipe, limit: Int = 4096) {
        let handle = pipe.fileHandleForReading
        // A queue of its own (a thread of its own): the blocking read holds no thread of the
        // global pool, which Swift concurrency and signal handlers need.
        DispatchQueue(label: "yolo.message-tail").async { [self] in
            while let chunk = try? handle.read(upToCount: 4096), !chunk.isEmpty {
                bytes.withLock { $0 = Array(($0 + chunk).suffix(limit)) }
            }
            done.signal()
        }
    }

    /// The tail, once the pipe has closed (the process has exited); callable more than once.
    func all() -> [UInt8] {
        done.wait()
        done.signal()
        return bytes.withLock { $0 }
    }
}

/// A video file or stream decoded by an `ffmpeg` subprocess into BGR24 frames, the bytes OpenCV's
/// `cv2.VideoCapture` (Ultralytics' reader) gives on the same file.
final class VideoDecoder: Sendable {
    /// The file path or URL, as passed to ffmpeg.
    let source: String
    /// A network stream rather than a file: it runs at its own pace.
    let isStream: Bool
    let width: Int
    let height: Int
    /// Frames per second, when the container says.
    let frameRate: Double?
    /// Frames the container announces, when it does (not for streams).
    let frameCount: Int?
    let reader: FrameReader
    private let process: Process
    private let messages: MessageTail

    /// Probes `url` and starts decoding it. Throws `SourceError.toolNotFound` or `.cannotOpen`,
    /// `CancellationError` when the current task is cancelled during the probe.
    init(_ url: URL) throws {
        source = url.isFileURL ? url.path : url.absoluteString
        isStream = !url.isFileURL
        let ffprobe = try VideoDecoder.locate("ffprobe"), ffmpeg = try VideoDecoder.locate("ffmpeg")
        let timeout = try VideoDecoder.streamTimeout()
        let microseconds = String(Int(timeout * 1e6))
        // Reads that get no byte for `timeout` fail rather than hang: `-rw_timeout` for files,
        // http, tcp and rtmp; rtsp and udp ignore it and take `-timeout`, which rtp, tcp, http and
        // srt also read as their socket timeout (in µs) and other protocols refuse (rtmp's means
        // listen).
        let socketTimeout = ["rtsp", "rtsps", "rtp", "udp", "tcp", "http", "https", "srt"].contains(url.scheme?.lowercased() ?? "")
        let input = ["-rw_timeout", microseconds] + (socketTimeout ? ["-timeout", microseconds] : []) + ["-i", source]
        // ffprobe reads up to 5 s of a stream to analyse it: 10 s over the timeout bound it where
        // a protocol honours no timeout.
        let started = Date()
        let probe = try VideoDecoder.run(ffprobe, ["-v", "error", "-select_streams", "v:0", "-show_entries",
                                                   "stream=width,height,avg_frame_rate,nb_frames:stream_side_data=rotation",
                                                   "-of", "json"] + input, source: source, deadline: timeout + 10)
        guard probe.status == 0 else {
            var reason = VideoDecoder.message(probe.errors, or: "ffprobe exit status \(probe.status)")
            // A silent stream's message can be vague ("Invalid data found"): say that time ran out.
            if isStream && Date().timeIntervalSince(started) >= timeout {
                reason += " (nothing received within \(String(format: "%g", timeout)) s, YOLO_STREAM_TIMEOUT)"
            }
            throw SourceError.cannotOpen(source: source, reason: reason)
        }
        struct Probe: Decodable {
            struct Stream: Decodable {
                struct SideData: Decodable { var rotation: Double? }
                var width: Int?, height: Int?, avg_frame_rate: String?, nb_frames: String?, side_data_list: [SideData]?
            }
            var streams: [Stream]?
        }
        guard let stream = (try? JSONDecoder().decode(Probe.self, from: probe.output))?.streams?.first,
              var width = stream.width, var height = stream.height else {
            throw SourceError.cannotOpen(source: source, reason: "no video stream")
        }
        // ffmpeg turns frames upright by the stream's rotation, as OpenCV does: a quarter turn
        // swaps the sides.
        let rotation = stream.side_data_list?.compactMap(\.rotation).first ?? 0
        if Int(rotation.magnitude.rounded()) % 180 == 90 { (width, height) = (height, width) }
        do {
            try Image.checkSize(width: width, height: height, source: source)
        } catch {
            throw SourceError.cannotOpen(source: source, reason: error.localizedDescription)
        }
        self.width = width
        self.height = height
        let rate = (stream.avg_frame_rate ?? "").split(separator: "/").compactMap { Double($0) }
        frameRate = rate.count == 2 && rate[1] > 0 && rate[0] > 0 ? rate[0] / rate[1] : nil
        frameCount = stream.nb_frames.flatMap { Int($0) }

        // Every decoded frame once, as OpenCV reads them: no duplicated or dropped frames.
        let output: Pipe, errors: Pipe
        (process, output, errors) = try VideoDecoder.start(ffmpeg, ["-nostdin", "-v", "error"] + input
            + ["-map", "0:v:0", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "bgr24", "-"], source: source)
        reader = FrameReader(fd: output.fileHandleForReading.fileDescriptor, width: width, height: height, source: source)
        messages = MessageTail(errors)
    }

    /// Waits for ffmpeg to exit after its last frame (`frames` were read) and throws if the
    /// video ended early or ffmpeg failed.
    func finish(frames: Int) throws {
        process.waitUntilExit()
        let log = messages.all()
        guard process.terminationReason == .exit else { return }  // stopped by `terminate()`
        let status = process.terminationStatus
        guard status == 0 else {
            throw SourceError.decodeFailed(source: source, frames: frames, status: status, reason: VideoDecoder.message(log, or: "no message"))
        }
        // A cut file decodes without failing, but says so on stderr and falls short of its count.
        if let frameCount, frames < frameCount, !log.isEmpty {
            throw SourceError.endedEarly(source: source, frames: frames, expected: frameCount, reason: VideoDecoder.message(log, or: ""))
        }
    }

    /// Stops ffmpeg; its output ends.
    func terminate() {
        VideoDecoder.kill(process)
    }

    /// Ends `process` with SIGKILL: a child started from a Dispatch thread inherits its signal
    /// mask, which blocks SIGTERM (`Process.terminate()`'s), so ffmpeg and ffprobe never see it.
    static func kill(_ process: Process) {
        if process.isRunning { _ = Glibc.kill(process.processIdentifier, SIGKILL) }
    }

    /// The executable `tool` from the directories of `PATH`.
    static func locate(_ tool: String) throws -> URL {
        let path = getenv("PATH").map { String(cString: $0) } ?? ""
        for directory in path.split(separator: ":") {
            let candidate = URL(fileURLWithPath: String(directory)).appendingPathComponent(tool)
            if access(candidate.path, X_OK) == 0 { return candidate }
        }
        throw SourceError.toolNotFound(tool: tool, searched: path.isEmpty ? "PATH is empty" : path)
    }

    /// Starts `tool` with its output and errors on pipes, its input on `input` or none.
    static func start(_ tool: URL, _ arguments: [String], input: Pipe? = nil, source: String) throws -> (Process, output: Pipe, errors: Pipe) {
        let process = Process(), output = Pipe(), errors = Pipe()
        process.executableURL = tool
        process.arguments = arguments
        process.standardInput = input ?? FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = errors
        do {
            try process.run()
        } catch {
            throw SourceError.cannotOpen(source: source, reason: "cannot start \(tool.path): \(error.localizedDescription)")
        }
        return (process, output, errors)
    }

    /// Seconds a stream may send nothing before its read fails: `YOLO_STREAM_TIMEOUT`, else 10.
    static func streamTimeout() throws -> Double {
        try environment("YOLO_STREAM_TIMEOUT", "a number of seconds in [0.001, 3600]") {
            Double($0).flatMap { $0 >= 0.001 && $0 <= 3600 ? $0 : nil }
        } ?? 10
    }

    /// Runs a short-lived tool to its end: its status, stdout (up to 64 KB) and stderr's tail.
    /// Stopped, and `SourceError.cannotOpen` thrown, after `deadline` seconds; stopped, and
    /// `CancellationError` thrown, when the current task is cancelled.
    private static func run(_ tool: URL, _ arguments: [String], source: String,
                            deadline: Double) throws -> (status: Int32, output: Data, errors: [UInt8]) {
        let (process, output, errors) = try start(tool, arguments, source: source)
        let out = MessageTail(output, limit: 1 << 16), err = MessageTail(errors)
        let started = Date()
        var stopped: (any Error)?
        while process.isRunning {
            if stopped == nil {
                if Task.isCancelled {
                    stopped = CancellationError()
                } else if Date().timeIntervalSince(started) > deadline {
                    stopped = SourceError.cannotOpen(source: source, reason: "no answer within \(String(format: "%g", deadline)) s")
                }
                if stopped != nil { kill(process) }
            }
            usleep(20_000)
        }
        process.waitUntilExit()
        let log = err.all(), data = Data(out.all())
        if let stopped { throw stopped }
        return (process.terminationStatus, data, log)
    }

    /// ffmpeg's last message lines without their "[component @ address]" prefix, or
    /// `fallback` when it wrote none.
    static func message(_ log: [UInt8], or fallback: String) -> String {
        let lines = String(decoding: log, as: UTF8.self).split(whereSeparator: \.isNewline).map { line in
            guard line.hasPrefix("["), let end = line.range(of: "] ") else { return String(line) }
            return String(line[end.upperBound...])
        }
        return lines.isEmpty ? fallback : lines.suffix(3).joined(separator: "; ")
    }
}

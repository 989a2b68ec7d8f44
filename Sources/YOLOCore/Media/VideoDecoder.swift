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
    /// A live source sent nothing for `seconds`.
    case stalled(source: String, seconds: Double)
    /// A live source was lost and `attempts` attempts in a row to reopen it failed; `reason` is
    /// the last attempt's failure.
    case reconnectFailed(source: String, attempts: Int, reason: String)
    /// No camera at `device`; `available` lists the V4L2 devices there are.
    case cameraNotFound(device: String, available: [String])

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
        case let .stalled(source, seconds):
            "\(source) sent nothing for \(String(format: "%g", seconds)) s"
        case let .reconnectFailed(source, attempts, reason):
            "\(source) was lost and \(attempts) \(attempts == 1 ? "attempt" : "attempts") to reconnect failed; the last: \(reason)"
        case let .cameraNotFound(device, available):
            "no camera at \(device): "
                + (available.isEmpty ? "this machine has no V4L2 device (/dev/video*)" : "the cameras are \(available.joined(separator: ", "))")
        }
    }
}

/// Packed 24-bit frames of one size read from a file descriptor: ffmpeg's output pipe (RGB) or
/// stdin (BGR, as OpenCV's frames are).
struct FrameReader: Sendable {
    let fd: Int32
    let width: Int
    let height: Int
    /// `.bgr` for stdin, `.rgb` for ffmpeg's output.
    let format: Image.PixelFormat
    /// Names the input in errors.
    let source: String
    /// Seconds without a byte after which a live source has stalled; nil waits as long as it takes.
    var stallTimeout: Double? = nil

    /// Frame `index`, blocking until all its bytes arrive; nil when the input ends before it, or
    /// when `stopped()` is true before its first byte (asked as bytes arrive, and every 50 ms
    /// while the input is idle): a stopped session's reader takes no bytes that a later reader of
    /// the same input should get. Throws `SourceError.stalled` after `stallTimeout` seconds
    /// without a byte.
    func next(index: Int, stopped: () -> Bool = { false }) throws -> Image? {
        let size = width * height * 3
        // Never zeroed: a frame is returned only once every byte is read into it.
        var bytes = [UInt8](unsafeUninitializedCapacity: size) { _, count in count = size }
        var filled = 0
        var lastByte = Date()
        while filled < size {
            if filled == 0 || stallTimeout != nil {
                var idle = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                let ready = poll(&idle, 1, 50)
                if ready < 0 && errno != EINTR {
                    throw SourceError.readFailed(source: source, reason: String(cString: strerror(errno)))
                }
                if filled == 0 && stopped() { return nil }
                if ready <= 0 {
                    if let stallTimeout, Date().timeIntervalSince(lastByte) >= stallTimeout {
                        throw SourceError.stalled(source: source, seconds: stallTimeout)
                    }
                    continue
                }
                lastByte = Date()
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
        return try Image(pixels: bytes, width: width, height: height, format: format)
    }
}

/// The last `limit` bytes a subprocess writes to a pipe (ffprobe's JSON), read until the pipe
/// closes: only the tail is kept.
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

/// ffmpeg's or ffprobe's stderr at `-v level+info` (or `level+error`), read line by line on a
/// thread of its own until it closes: the output stream ffmpeg announces just before writing its
/// first frame (its size and rate), and the last error lines, since a damaged stream can log
/// without end.
final class FFmpegLog: Sendable {
    /// The decoded frames ffmpeg writes: its "Output #0" section's video stream.
    struct Stream: Equatable {
        var width: Int, height: Int
        /// The rate ffmpeg states, when in (0, 1000) as OpenCV's `CAP_PROP_FPS` is trusted.
        var frameRate: Double?
    }

    private struct State {
        var stream: Stream?
        var inOutput = false
        var errors = [String]()
        var closed = false
    }

    private let state = Mutex(State())

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        DispatchQueue(label: "yolo.ffmpeg-log").async { [self] in
            var pending = [UInt8](), chunk = [UInt8](repeating: 0, count: 4096)
            // read(2), not `FileHandle.read(upToCount:)`, which waits for the whole count: lines
            // are taken as they come.
            while case let n = chunk.withUnsafeMutableBytes({ read(handle.fileDescriptor, $0.baseAddress, 4096) }), n != 0 {
                if n < 0 {
                    if errno == EINTR { continue } else { break }
                }
                pending += chunk[..<n]
                while let end = pending.firstIndex(where: { $0 == 10 || $0 == 13 }) {
                    take(String(decoding: pending[..<end], as: UTF8.self))
                    pending.removeSubrange(...end)
                }
                // A line without end is cut: only its start can name a level.
                if pending.count > 4096 { pending.removeAll() }
            }
            take(String(decoding: pending, as: UTF8.self))
            state.withLock { $0.closed = true }
        }
    }

    /// One line: "[component @ 0x…] [level] text" or "[level] text".
    private func take(_ line: String) {
        var text = Substring(line)
        if text.hasPrefix("["), text.contains(" @ "), let end = text.range(of: "] ") { text = text[end.upperBound...] }
        guard text.hasPrefix("["), let end = text.range(of: "] ") else { return }
        let level = String(text[text.index(after: text.startIndex)..<end.lowerBound])
        text = text[end.upperBound...]
        state.withLock { s in
            if ["error", "fatal", "panic"].contains(level) {
                s.errors = Array((s.errors + [String(text)]).suffix(3))
            } else if text.hasPrefix("Output #0") {
                s.inOutput = true
            } else if s.inOutput, s.stream == nil, text.contains("Stream #0:0"), text.contains("Video:") {
                s.stream = FFmpegLog.stream(in: String(text))
            }
        }
    }

    /// "…, rgb24(pc, …), 640x360, q=2-31, …, 25 fps, …": the first ", WxH" and the "N fps".
    static func stream(in line: String) -> Stream? {
        guard let size = line.firstMatch(of: /, (\d+)x(\d+)/), let width = Int(size.1), let height = Int(size.2) else { return nil }
        var rate: Double?
        if let match = line.firstMatch(of: /, ([0-9.]+)(k?) fps/), let value = Double(match.1) { rate = match.2.isEmpty ? value : value * 1000 }
        return Stream(width: width, height: height, frameRate: rate.flatMap { $0 > 0 && $0 < 1000 ? $0 : nil })
    }

    /// The output stream once ffmpeg announces it; nil when the log closes first (ffmpeg failed),
    /// after `timeout` seconds, or when `stopped()` (asked every 20 ms).
    func stream(timeout: Double, stopped: () -> Bool) -> Stream? {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            let (stream, closed) = state.withLock { ($0.stream, $0.closed) }
            if stream != nil || closed || stopped() || Date() >= deadline { return stream }
            usleep(20_000)
        }
    }

    /// The last error lines joined, or `fallback` when there were none; waits for the log to
    /// close (the process has exited or been killed).
    func message(or fallback: String) -> String {
        while !state.withLock({ $0.closed }) { usleep(5_000) }
        let errors = state.withLock { $0.errors }
        return errors.isEmpty ? fallback : errors.joined(separator: "; ")
    }
}

/// What ffmpeg opens and how: its input options through `-i`, and whether the source is live.
package struct VideoInput: Sendable, Equatable {
    /// The path, URL or device, as messages name it.
    package let source: String
    package let arguments: [String]
    /// Runs at its own pace, may be lost and reopened (`ReconnectPolicy`): a stream URL or a
    /// camera, as Ultralytics decides it (see `isLive(_:)`).
    package let isLive: Bool

    /// A file or URL; reads that get no byte for `timeout` seconds fail rather than hang:
    /// `-rw_timeout` for files, http, tcp and rtmp; rtsp and udp ignore it and take `-timeout`,
    /// which rtp, tcp, http and srt also read as their socket timeout (in µs) and other
    /// protocols refuse (rtmp's means listen). A live source starts from 32 KB and no analysis:
    /// ffmpeg's default reads 5 s of a stream before its first frame.
    package init(_ url: URL, timeout: Double) {
        source = url.isFileURL ? url.path : url.absoluteString
        isLive = VideoInput.isLive(url)
        let microseconds = String(Int(timeout * 1e6))
        let socketTimeout = ["rtsp", "rtsps", "rtp", "udp", "tcp", "http", "https", "srt"].contains(url.scheme?.lowercased() ?? "")
        arguments = ["-rw_timeout", microseconds] + (socketTimeout ? ["-timeout", microseconds] : [])
            + (isLive ? ["-probesize", "32768", "-analyzeduration", "0"] : []) + ["-i", source]
    }

    /// A V4L2 camera (`/dev/video0`) through ffmpeg's `v4l2` input; the size and rate are asked
    /// of the device, which keeps the nearest it supports.
    package init(camera device: String, frameSize: (width: Int, height: Int)?, frameRate: Double?) {
        source = device
        isLive = true
        arguments = ["-f", "v4l2"] + (frameSize.map { ["-video_size", "\($0.width)x\($0.height)"] } ?? [])
            + (frameRate.map { ["-framerate", String(format: "%g", $0)] } ?? []) + ["-i", device]
    }

    /// Live as Ultralytics' `check_source` decides: rtsp, rtmp, tcp (and udp, srt, rtp) whatever
    /// the path, http(s) whose path has no image or video extension. Files never are.
    package static func isLive(_ url: URL) -> Bool {
        switch url.scheme?.lowercased() ?? "" {
        case "rtsp", "rtsps", "rtmp", "rtmps", "tcp", "udp", "srt", "rtp": true
        case "http", "https": !MediaFiles.imageExtensions.union(MediaFiles.videoExtensions).contains(url.pathExtension.lowercased())
        default: false
        }
    }
}

/// A video file or stream decoded by one `ffmpeg` subprocess into RGB24 frames: the bytes
/// OpenCV's `cv2.VideoCapture` (Ultralytics' reader) gives on the same file, in RGB order
/// (swscale converts to either order with the same arithmetic).
final class VideoDecoder: Sendable {
    let input: VideoInput
    var source: String { input.source }
    let width: Int
    let height: Int
    /// Frames per second, when the container (a file) or ffmpeg (a live source) says.
    let frameRate: Double?
    /// Frames the container announces, when it does (not for live sources).
    let frameCount: Int?
    let reader: FrameReader
    private let process: Process
    private let log: FFmpegLog

    /// Starts decoding `input` and waits for its first frame (so that its size is known): one
    /// connection, no probe, for a live source; a file is probed first for its frame count and
    /// rate. Throws `SourceError.toolNotFound` or `.cannotOpen` (also after `timeout` seconds
    /// without a frame), `CancellationError` when `stopped()` turns true (asked every 20 ms).
    init(_ input: VideoInput, timeout: Double, stopped: () -> Bool) throws {
        self.input = input
        let source = input.source
        let ffmpeg = try VideoDecoder.locate("ffmpeg")
        var probedRate: Double?
        // ffprobe reads up to 5 s of a file to analyse it: 10 s over the timeout bound it where
        // a protocol honours no timeout.
        if input.isLive {
            frameCount = nil
        } else {
            let probe = try VideoDecoder.run(try VideoDecoder.locate("ffprobe"),
                                             ["-v", "level+error", "-select_streams", "v:0", "-show_entries",
                                              "stream=avg_frame_rate,nb_frames", "-of", "json"] + input.arguments,
                                             source: source, deadline: timeout + 10, stopped: stopped)
            struct Probe: Decodable {
                struct Stream: Decodable { var avg_frame_rate: String?, nb_frames: String? }
                var streams: [Stream]?
            }
            let stream = (try? JSONDecoder().decode(Probe.self, from: probe))?.streams?.first
            let rate = (stream?.avg_frame_rate ?? "").split(separator: "/").compactMap { Double($0) }
            probedRate = rate.count == 2 && rate[1] > 0 && rate[0] > 0 ? rate[0] / rate[1] : nil
            frameCount = stream?.nb_frames.flatMap { Int($0) }
        }
        // Every decoded frame once, as OpenCV reads them: no duplicated or dropped frames.
        let started = Date()
        let (process, output, errors) = try VideoDecoder.start(ffmpeg, ["-nostdin", "-nostats", "-hide_banner", "-v", "level+info"]
            + input.arguments + ["-map", "0:v:0", "-fps_mode", "passthrough", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"], source: source)
        let log = FFmpegLog(errors)
        let stream = log.stream(timeout: input.isLive ? timeout : timeout + 10, stopped: stopped)
        guard let stream else {
            VideoDecoder.kill(process)
            if stopped() { throw CancellationError() }
            var reason = log.message(or: "no video frame")
            // A silent stream's message can be vague ("Invalid data found"): say that time ran out.
            if Date().timeIntervalSince(started) >= timeout {
                reason += " (nothing received within \(String(format: "%g", timeout)) s)"
            }
            throw SourceError.cannotOpen(source: source, reason: reason)
        }
        do {
            try Image.checkSize(width: stream.width, height: stream.height, source: source)
        } catch {
            VideoDecoder.kill(process)
            throw SourceError.cannotOpen(source: source, reason: error.localizedDescription)
        }
        (self.process, self.log) = (process, log)
        width = stream.width
        height = stream.height
        frameRate = input.isLive ? stream.frameRate : probedRate
        reader = FrameReader(fd: output.fileHandleForReading.fileDescriptor, width: width, height: height, format: .rgb, source: source,
                             stallTimeout: input.isLive ? timeout : nil)
    }

    /// Waits for ffmpeg to exit after its last frame (`frames` were read) and throws if the
    /// video ended early or ffmpeg failed.
    func finish(frames: Int) throws {
        process.waitUntilExit()
        let message = log.message(or: "")
        guard process.terminationReason == .exit else { return }  // stopped by `terminate()`
        let status = process.terminationStatus
        guard status == 0 else {
            throw SourceError.decodeFailed(source: source, frames: frames, status: status, reason: message.isEmpty ? "no message" : message)
        }
        // A cut file decodes without failing, but says so on stderr and falls short of its count.
        if let frameCount, frames < frameCount, !message.isEmpty {
            throw SourceError.endedEarly(source: source, frames: frames, expected: frameCount, reason: message)
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

    /// Runs ffprobe to its end: its stdout (up to 64 KB). Throws `SourceError.cannotOpen` with its
    /// message when it fails, or after `deadline` seconds; `CancellationError` when `stopped()`
    /// turns true.
    private static func run(_ tool: URL, _ arguments: [String], source: String, deadline: Double,
                            stopped: () -> Bool) throws -> Data {
        let (process, output, errors) = try start(tool, arguments, source: source)
        let out = MessageTail(output, limit: 1 << 16), log = FFmpegLog(errors)
        let started = Date()
        var failure: (any Error)?
        while process.isRunning {
            if failure == nil {
                if stopped() {
                    failure = CancellationError()
                } else if Date().timeIntervalSince(started) > deadline {
                    failure = SourceError.cannotOpen(source: source, reason: "no answer within \(String(format: "%g", deadline)) s")
                }
                if failure != nil { kill(process) }
            }
            usleep(20_000)
        }
        process.waitUntilExit()
        let data = Data(out.all()), message = log.message(or: "ffprobe exit status \(process.terminationStatus)")
        if let failure { throw failure }
        guard process.terminationStatus == 0 else { throw SourceError.cannotOpen(source: source, reason: message) }
        return data
    }
}

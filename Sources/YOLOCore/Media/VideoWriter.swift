import Foundation
import Synchronization

/// An H.264 MP4 file written frame by frame through an `ffmpeg` subprocess, e.g. a session's
/// annotated results:
///
/// ```swift
/// let writer = try VideoWriter(url: URL(fileURLWithPath: "out.mp4"), width: 640, height: 360, frameRate: 25)
/// for await result in session.results { try writer.write(try result.annotated()) }
/// try writer.finish()
/// ```
///
/// Frames go to ffmpeg as raw RGB through a pipe, so memory holds one frame whatever the length.
/// The writer ignores SIGPIPE for the whole process: an ffmpeg that stops early then surfaces as
/// a `VideoWriterError` instead of killing the process.
public final class VideoWriter: Sendable {
    public let url: URL
    public let width: Int
    public let height: Int
    private let process: Process
    private let input: FileHandle
    private let frames = Mutex(0)
    private let log: FFmpegLog

    /// Starts ffmpeg writing `url` (replaced if it exists) at `frameRate` frames per second.
    /// Throws `SourceError.toolNotFound` without ffmpeg, `VideoWriterError.invalidSize` for a
    /// size H.264 cannot hold or a rate that is not a positive number.
    public init(url: URL, width: Int, height: Int, frameRate: Double) throws {
        guard width > 0, height > 0, width <= 16384, height <= 16384 else {
            throw VideoWriterError.invalidSize(file: url.path, reason: "\(width)×\(height): H.264 holds sides of 1 to 16384")
        }
        guard frameRate.isFinite, frameRate > 0, frameRate <= 1000 else {
            throw VideoWriterError.invalidSize(file: url.path, reason: "frame rate \(frameRate) is not in (0, 1000]")
        }
        (self.url, self.width, self.height) = (url, width, height)
        signal(SIGPIPE, SIG_IGN)
        let errors: Pipe, input = Pipe()
        (process, _, errors) = try VideoDecoder.start(
            try VideoDecoder.locate("ffmpeg"),
            ["-v", "level+error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24", "-s", "\(width)x\(height)",
             "-r", String(frameRate), "-i", "-",
             // yuv420p halves both sides: an odd side gets one padding pixel.
             "-vf", "pad=ceil(iw/2)*2:ceil(ih/2)*2", "-c:v", "libx264", "-pix_fmt", "yuv420p", "-movflags", "+faststart", url.path],
            input: input, source: url.path)
        self.input = input.fileHandleForWriting
        log = FFmpegLog(errors)
    }

    deinit {
        try? input.close()
        VideoDecoder.kill(process)
    }

    /// Appends `image`, which must have the writer's size.
    public func write(_ image: Image) throws {
        guard image.width == width, image.height == height else {
            throw VideoWriterError.invalidSize(file: url.path, reason: "frame \(image.width)×\(image.height) differs from the video's \(width)×\(height)")
        }
        try frames.withLock { count in
            do {
                try input.write(contentsOf: image.pixels)
            } catch {
                throw VideoWriterError.encodeFailed(file: url.path, frames: count, reason: failureReason(error))
            }
            count += 1
        }
    }

    /// Ends the file and waits for ffmpeg; throws if it failed.
    public func finish() throws {
        let count = frames.withLock { $0 }
        let reason = failureReason(nil)
        guard process.terminationStatus == 0 else {
            throw VideoWriterError.encodeFailed(file: url.path, frames: count, reason: reason)
        }
    }

    /// Closes ffmpeg's input and waits for it to exit: its own last message, else `error`'s.
    private func failureReason(_ error: (any Error)?) -> String {
        try? input.close()
        process.waitUntilExit()
        return log.message(or: error?.localizedDescription ?? "ffmpeg exit status \(process.terminationStatus)")
    }
}

/// Why a `VideoWriter` could not write its file.
public enum VideoWriterError: Error, LocalizedError, Equatable {
    /// The frame size or rate cannot be encoded.
    case invalidSize(file: String, reason: String)
    /// ffmpeg failed after `frames` frames; `reason` is its own message.
    case encodeFailed(file: String, frames: Int, reason: String)

    public var errorDescription: String? {
        switch self {
        case let .invalidSize(file, reason): "cannot write video \(file): \(reason)"
        case let .encodeFailed(file, frames, reason): "writing video \(file) failed after \(frames) frames: \(reason)"
        }
    }
}

import Dispatch
import Foundation
import Synchronization

/// A model running over a sequence of frames: a video file or stream, image files, raw frames on
/// stdin or any producer of `Image`s. Results arrive in frame order on `results`; the settings,
/// the model and the source itself (`source`) can change while it runs, from the next frame on.
///
/// ```swift
/// let session = try YOLOSession(model: model, source: .video(URL(fileURLWithPath: "pan.mp4")))
/// for await result in session.results { print(result.frame!, result.boxes.count) }
/// if let error = session.error { print(error.localizedDescription) }   // a source that ended early
/// ```
///
/// With a tracker, boxes carry track IDs as Ultralytics' `model.track(source, persist=True)`
/// gives them:
///
/// ```swift
/// let session = try YOLOSession(model: model, source: .video(url), tracker: .bytetrack)
/// for await result in session.results { print(result.boxes.map(\.id)) }
/// ```
///
/// The source is read beside inference, a few frames ahead. File sources (and stdin) never lose a
/// frame: the reader waits when inference falls behind. Live sources (stream URLs, cameras,
/// `.frames`) keep only the newest waiting frame, as Ultralytics' `stream_buffer=False`
/// (`droppedFrames` counts the others; `dropsStaleFrames: false` keeps them all), and are
/// reopened when lost (`ReconnectPolicy`). Results are produced as `results` is iterated, so a
/// slow consumer holds back the source rather than piling up results in memory.
public final class YOLOSession: Sendable {
    /// Where the frames come from.
    public enum Source: Sendable {
        /// A video file or stream URL, anything ffmpeg opens (mp4, mkv, avi, webm, rtsp, http),
        /// decoded by an `ffmpeg` subprocess exactly as OpenCV reads it. Live as Ultralytics
        /// decides: rtsp, rtmp, tcp, udp, srt URLs, and http(s) ones whose path has no image or
        /// video extension.
        case video(URL)
        /// A V4L2 camera, live; `frameSize` and `frameRate` are asked of the device, which keeps
        /// the nearest it supports.
        case camera(Camera, frameSize: (width: Int, height: Int)? = nil, frameRate: Double? = nil)
        /// JPEG or PNG files in this order; a directory, or a pattern (`frames/*.png`), stands for
        /// its JPEG and PNG files in natural order (`img2` before `img10`).
        case images([URL])
        /// Raw BGR24 frames of `width` × `height` on standard input, back to back.
        case stdin(width: Int, height: Int)
        /// Frames from any producer (a camera, a network feed), numbered as they arrive; live,
        /// since a producer cannot be held back.
        case frames(AsyncStream<Image>)
    }

    /// A V4L2 camera, named as a phone app names its cameras.
    public enum Camera: Sendable, Equatable {
        /// The first V4L2 device, `/dev/video0`.
        case back
        /// The second, `/dev/video1`.
        case front
        /// `/dev/video<n>`.
        case device(Int)
        /// A device path such as `/dev/video2` or `/dev/v4l/by-id/…`.
        case path(String)

        /// The camera a source names as Ultralytics writes it: an index (`0`) or a V4L2 device
        /// (`/dev/video0`); nil for any other source.
        public init?(source: String) {
            if !source.isEmpty, source.allSatisfy(\.isASCII), let index = Int(source), index >= 0 {
                self = .device(index)
            } else if source.hasPrefix("/dev/video") {
                self = .path(source)
            } else {
                return nil
            }
        }

        /// The device file.
        public var path: String {
            switch self {
            case .back: "/dev/video0"
            case .front: "/dev/video1"
            case let .device(n): "/dev/video\(n)"
            case let .path(path): path
            }
        }
    }

    /// One result per frame, in frame order (`Results.frame` is the frame's 0-based index in the
    /// source). Ends at the end of the source, at `stop()` (after the frame in inference, if
    /// any), or at an error (`error`). One consumer at a time.
    public let results: AsyncStream<Results>
    /// Frames in the current source when known beforehand (a video's container count, the number
    /// of image files), before any `frameStride`.
    public var frameCount: Int? { core.state.withLock { $0.input.input.frameCount } }
    /// The current video's frames per second, when its container (or, live, ffmpeg) says.
    public var frameRate: Double? { core.state.withLock { $0.input.input.feed?.first.frameRate } }
    /// The current source runs at its own pace: stale frames drop, a loss is reconnected.
    public var isLive: Bool { core.state.withLock { $0.input.input.isLive } }
    private let core: SessionCore

    /// Opens `source` and waits for its first frame. A source that cannot be opened throws here
    /// (`SourceError.cannotOpen` with ffmpeg's message, `.cameraNotFound`, `.toolNotFound`
    /// without ffmpeg, `ImageError` for a bad stdin frame size). A video or stream that sends
    /// nothing for `reconnect.timeout` seconds fails to open; later, a file ends with `error`
    /// and a live source is reopened as `reconnect` says. Cancelling the current task stops the
    /// opening and throws `CancellationError`; cancelling the task iterating `results` stops the
    /// session as `stop()` does.
    ///
    /// - Parameters:
    ///   - model: the model for the first frame on (see `model`).
    ///   - source: where the frames come from.
    ///   - task: the task expected of every model the session runs, as in `YOLO.predict`;
    ///     `nil` runs each model's own task. A mismatch with `model` throws here
    ///     (`YOLOError.taskMismatch`), with a later model, it ends the session.
    ///   - frameStride: predict every `frameStride`-th frame only, frames `frameStride - 1`,
    ///     `2·frameStride - 1`, … as Ultralytics' `vid_stride` reads a video; `Results.frame`
    ///     stays the index in the source.
    ///   - tracker: track the boxes across frames with this tracker (see `tracker`). As
    ///     Ultralytics' `model.track`, the session's confidence threshold then starts at 0.1 so that
    ///     the tracker sees low-confidence boxes; `configuration` can change it.
    ///   - dropsStaleFrames: for live sources, keep only the newest frame waiting for inference
    ///     (latest wins) instead of making the source wait; ignored for files.
    ///   - reconnect: how a live source that is lost is reopened, and the stream timeout.
    /// - Throws: also `TrackingError.unsupportedTask` for a tracker on a classify model,
    ///   `YOLOError.invalidConfiguration` for a policy out of range.
    public init(model: YOLO, source: Source, task: YOLOTask? = nil, tracker: TrackerConfiguration? = nil,
                frameStride: Int = 1, dropsStaleFrames: Bool = true, reconnect: ReconnectPolicy = ReconnectPolicy()) throws {
        let effectiveTask = try model.resolve(task)
        guard frameStride >= 1 else {
            throw YOLOError.invalidConfiguration(field: "frameStride", value: "\(frameStride)", reason: "must be at least 1")
        }
        if tracker != nil, effectiveTask == .classify {
            throw TrackingError.unsupportedTask(effectiveTask)
        }
        try reconnect.validate()
        let opening = Opening(frameStride: frameStride, dropsStaleFrames: dropsStaleFrames, reconnect: reconnect)
        let input = try opening.open(source)
        let core = SessionCore(model: model, task: task, source: source, input: input, opening: opening)
        if let tracker {
            core.state.withLock { s in
                s.tracker = ObjectTracker(tracker)
                s.configuration.confidenceThreshold = 0.1
            }
        }
        self.core = core
        results = AsyncStream(unfolding: { await core.next() }, onCancel: { core.stop() })
        input.start()
    }

    /// Opens a camera (see `init(model:source:task:tracker:frameStride:dropsStaleFrames:reconnect:)`).
    ///
    /// ```swift
    /// let session = try YOLOSession(model: model, camera: .back)
    /// session.source = .camera(.front)     // the camera flip
    /// ```
    public convenience init(model: YOLO, camera: Camera, task: YOLOTask? = nil, tracker: TrackerConfiguration? = nil) throws {
        try self.init(model: model, source: .camera(camera), task: task, tracker: tracker)
    }

    /// Where the frames come from. Setting it opens the new source beside the running one, then
    /// switches: results from then on come from the new source (frames numbered from 0), the
    /// old one is closed, and the tracker, if any, starts anew (a new source is a new scene; IDs
    /// from 1). A source that cannot be opened ends the session with its error (`error`). The
    /// session's frame stride, stale-frame policy and reconnection policy carry over.
    public var source: Source {
        get { core.state.withLock { $0.source } }
        set { core.switchSource(to: newValue) }
    }

    /// The model used from the next frame on; replacing it leaves the source running.
    public var model: YOLO {
        get { core.state.withLock { $0.model } }
        set { core.state.withLock { $0.model = newValue } }
    }

    /// Settings used from the next frame on, for whichever model runs, without changing the
    /// model's own `configuration`. Starts as the first model's. An invalid value ends the
    /// session with `YOLOError.invalidConfiguration` (`error`).
    public var configuration: YOLOConfiguration {
        get { core.state.withLock { $0.configuration } }
        set { core.state.withLock { $0.configuration = newValue } }
    }

    /// The tracker giving boxes their IDs from the next frame on, nil when not tracking. Setting
    /// it starts a new tracker (IDs from 1); the tracker keeps running when `model` changes.
    /// Results of a model without boxes then end the session with `TrackingError`.
    public var tracker: TrackerConfiguration? {
        get { core.state.withLock { $0.tracker?.configuration } }
        set { core.state.withLock { $0.tracker = newValue.map { ObjectTracker($0) } } }
    }

    /// Applied to each frame before the model sees it, from the next frame on (e.g.
    /// `TrackZone.masked`); results carry the transformed frame.
    public var frameTransform: (@Sendable (Image) -> Image)? {
        get { core.state.withLock { $0.frameTransform } }
        set { core.state.withLock { $0.frameTransform = newValue } }
    }

    /// The tracks after the last frame delivered, lost ones included (their `history` gives
    /// trails); empty when not tracking.
    public var tracks: [Track] { core.state.withLock { $0.tracker?.tracks ?? [] } }

    /// Forgets every track from the next frame on; IDs start again at 1.
    public func resetTracker() { core.state.withLock { $0.tracker?.reset() } }

    /// The result of the last frame delivered.
    public var latestResult: Results? { core.state.withLock { $0.latest } }

    /// Why the session ended early: the source's error (`SourceError`, `ImageError`) or the
    /// model's (`YOLOError`); nil while running and after a complete source or `stop()`.
    public var error: (any Error)? { core.state.withLock { $0.input.queue.failure ?? $0.failure } }

    /// Frames of the current live source skipped because a newer one arrived before inference took them.
    public var droppedFrames: Int { core.state.withLock { $0.input.queue.dropped } }

    /// Times the current live source was lost and reopened.
    public var reconnects: Int { core.state.withLock { $0.input.input.feed?.reconnects ?? 0 } }

    /// Holds back results from now until `resume()`: a frame already in inference is delivered
    /// only after it.
    public func pause() { core.state.withLock { $0.paused = true } }

    public func resume() {
        core.state.withLock { s in
            s.paused = false
            s.waiter?.resume()
            s.waiter = nil
        }
    }

    /// Ends `results` and stops reading the source.
    public func stop() { core.stop() }
}

/// The session's state, shared by the session and its results stream (whichever lives longer):
/// when both are gone, the source stops.
final class SessionCore: Sendable {
    struct State {
        var model: YOLO
        var configuration: YOLOConfiguration
        var source: YOLOSession.Source
        var input: OpenInput
        /// Counts `source` changes: an opening that finishes after a newer one began is dropped.
        var switches = 0
        /// The last change whose opening finished (installed or failed).
        var settled = 0
        var tracker: ObjectTracker?
        var frameTransform: (@Sendable (Image) -> Image)?
        var latest: Results?
        /// When the last results (at most 30) were delivered, for `Results.fps`.
        var deliveries: [UInt64] = []
        var failure: (any Error)?
        var paused = false
        var stopped = false
        /// The consumer waiting for `resume()`.
        var waiter: CheckedContinuation<Void, Never>?
    }

    let state: Mutex<State>
    private let task: YOLOTask?
    private let opening: Opening

    init(model: YOLO, task: YOLOTask?, source: YOLOSession.Source, input: OpenInput, opening: Opening) {
        state = Mutex(State(model: model, configuration: model.configuration, source: source, input: input))
        self.task = task
        self.opening = opening
    }

    deinit { stop() }

    func stop() {
        let input = state.withLock { s in
            s.stopped = true
            s.waiter?.resume()
            s.waiter = nil
            return s.input
        }
        input.close()
    }

    /// Opens `source` off the caller's thread, then makes it the session's input (see
    /// `YOLOSession.source`).
    func switchSource(to source: YOLOSession.Source) {
        let number = state.withLock { s in
            s.source = source
            s.switches += 1
            return s.switches
        }
        let opening = opening
        Task {
            let opened: OpenInput
            do {
                opened = try await offload { try opening.open(source) }
            } catch {
                let current = state.withLock { s in
                    s.settled = max(s.settled, number)
                    if s.switches == number && !s.stopped { s.failure = error }
                    return s.switches == number
                }
                if current { stop() }
                return
            }
            let replaced: OpenInput? = state.withLock { s in
                s.settled = max(s.settled, number)
                guard s.switches == number, !s.stopped else { return nil }
                defer { s.input = opened }
                s.tracker?.reset()
                return s.input
            }
            guard let replaced else { return opened.close() }
            replaced.close()
            opened.start()
        }
    }

    /// The next frame's result; nil at the end of the source, after `stop()` or an error. A frame
    /// of a source switched away from, waiting or in inference, is dropped.
    func next() async -> Results? {
        while true {
            let (queue, input) = state.withLock { ($0.input.queue, $0.input.input) }
            guard await running() else { return nil }
            guard let frame = await queue.next() else {
                // A source that ended while the next one opens is followed by it.
                let (current, switching) = state.withLock { ($0.input.queue === queue && !$0.stopped, $0.settled < $0.switches) }
                if current && !switching { return nil }
                if current { try? await Task.sleep(for: .milliseconds(10)) }
                continue
            }
            guard await running() else { return nil }
            let (model, configuration, transform) = state.withLock { ($0.model, $0.configuration, $0.frameTransform) }
            var result: Results?
            do {
                var inferred = try await InferenceExecutor.shared.run { [task] cancellation in
                    try model(transform?(frame.image) ?? frame.image, task: task, configuration: configuration,
                              cancellation: cancellation)
                }
                inferred.frame = frame.index
                inferred.path = frame.name
                inferred.time = input.isLive ? .wallClock(frame.arrival)
                    : input.feed?.first.frameRate.flatMap { $0 > 0 ? .offset(Double(frame.index) / $0) : nil }
                result = try state.withLock { [inferred] s in
                    guard s.input.queue === queue else { return nil }
                    return try s.tracker?.update(inferred) ?? inferred
                }
            } catch {
                // A consumer that stops iterating (its task cancelled) ends the session without an error.
                if !(error is CancellationError) { state.withLock { $0.failure = error } }
                stop()
                return nil
            }
            guard let result else { continue }
            // Held while paused; a frame inferred before `stop()` is still delivered.
            _ = await running()
            return state.withLock { [result] s in
                var result = result
                let now = DispatchTime.now().uptimeNanoseconds
                s.deliveries = s.deliveries.suffix(29) + [now]
                if let first = s.deliveries.first, first < now {
                    result.fps = Double(s.deliveries.count - 1) * 1e9 / Double(now - first)
                } else {
                    let speed = result.speed, ms = speed.preprocess + speed.inference + speed.postprocess
                    result.fps = ms > 0 ? 1000 / ms : nil
                }
                s.latest = result
                return result
            }
        }
    }

    /// Waits while paused; false once stopped.
    private func running() async -> Bool {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            state.withLock { s in
                if s.paused && !s.stopped { s.waiter = c } else { c.resume() }
            }
        }
        return !state.withLock { $0.stopped }
    }
}

/// A frame of a source with its 0-based index, the name results report (`Results.path`) and
/// when it was read.
struct Frame: Sendable {
    let index: Int
    let image: Image
    let name: String?
    var arrival = Date()
}

/// Frames between a source's reader and inference: every `stride`-th frame of the source. At
/// most `capacity` wait: a full queue makes the reader wait, or with `dropsStale` loses its
/// oldest frame to the new one.
final class FrameQueue: Sendable {
    private struct State {
        var frames: [Frame] = []
        var dropped = 0
        /// The source has no more frames; `failure` says why when it ended early.
        var ended = false
        var failure: (any Error)?
        /// The consumer stopped: the reader's frames are no longer wanted.
        var closed = false
        var consumer: CheckedContinuation<Frame?, Never>?
        var producer: CheckedContinuation<Void, Never>?
    }

    private let state = Mutex(State())
    private let capacity: Int
    private let dropsStale: Bool
    private let stride: Int

    init(capacity: Int, dropsStale: Bool, stride: Int) {
        self.capacity = capacity
        self.dropsStale = dropsStale
        self.stride = stride
    }

    var dropped: Int { state.withLock { $0.dropped } }
    var failure: (any Error)? { state.withLock { $0.failure } }
    /// The consumer has stopped (`close()`).
    var isClosed: Bool { state.withLock { $0.closed } }

    /// Hands `frame` to the consumer, waiting for room unless stale frames drop; false once the
    /// consumer has stopped.
    func put(_ frame: Frame) async -> Bool {
        while true {
            let placed: Bool? = state.withLock { s in
                if s.closed { return false }
                if (frame.index + 1) % stride != 0 { return true }
                if let consumer = s.consumer {
                    s.consumer = nil
                    consumer.resume(returning: frame)
                } else if s.frames.count < capacity {
                    s.frames.append(frame)
                } else if dropsStale {
                    s.frames.removeFirst()
                    s.dropped += 1
                    s.frames.append(frame)
                } else {
                    return nil
                }
                return true
            }
            if let placed { return placed }
            await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
                state.withLock { s in
                    if s.closed || s.frames.count < capacity { c.resume() } else { s.producer = c }
                }
            }
        }
    }

    /// The source has no more frames; `error` says why it ended before its end (ignored once
    /// the consumer stopped: stopping cuts the source off).
    func finish(_ error: (any Error)?) {
        state.withLock { s in
            s.ended = true
            if !s.closed { s.failure = error }
            s.consumer?.resume(returning: nil)
            s.consumer = nil
        }
    }

    /// The consumer stops: waiting frames are released and the reader is told.
    func close() {
        state.withLock { s in
            s.closed = true
            s.frames.removeAll()
            s.producer?.resume()
            s.producer = nil
            s.consumer?.resume(returning: nil)
            s.consumer = nil
        }
    }

    /// The oldest waiting frame; nil once the source has ended or the consumer stopped.
    func next() async -> Frame? {
        await withCheckedContinuation { (c: CheckedContinuation<Frame?, Never>) in
            state.withLock { s in
                if !s.frames.isEmpty {
                    c.resume(returning: s.frames.removeFirst())
                    s.producer?.resume()
                    s.producer = nil
                } else if s.ended || s.closed {
                    c.resume(returning: nil)
                } else {
                    s.consumer = c
                }
            }
        }
    }
}

/// How a session opens its sources: the settings that carry over when `source` changes.
struct Opening: Sendable {
    let frameStride: Int
    let dropsStaleFrames: Bool
    let reconnect: ReconnectPolicy

    /// Opens `source` (blocking until its first frame for a video) with a queue for its frames.
    func open(_ source: YOLOSession.Source) throws -> OpenInput {
        let input = try Input(source, policy: reconnect)
        let drops = dropsStaleFrames && input.isLive
        // A few frames ahead: decoding the next frame overlaps inference of this one.
        return OpenInput(input: input, queue: FrameQueue(capacity: drops ? 1 : 3, dropsStale: drops, stride: frameStride))
    }
}

/// An opened source and the queue its frames go to.
struct OpenInput: Sendable {
    let input: Input
    let queue: FrameQueue

    /// Starts reading the source into the queue.
    func start() { Task { await input.produce(into: queue) } }

    /// Stops reading: waiting frames are released, ffmpeg is stopped.
    func close() {
        queue.close()
        input.feed?.terminate()
    }
}

/// A source opened: what `YOLOSession.init` checked, ready to be read.
enum Input: Sendable {
    case video(VideoFeed, name: String)
    case raw(FrameReader)
    case images([URL])
    case frames(AsyncStream<Image>)

    init(_ source: YOLOSession.Source, policy: ReconnectPolicy) throws {
        switch source {
        case let .video(url):
            self = .video(try VideoFeed(VideoInput(url, timeout: policy.timeout), policy: policy), name: url.lastPathComponent)
        case let .camera(camera, frameSize, frameRate):
            let device = camera.path
            guard FileManager.default.fileExists(atPath: device) else {
                let devices = (try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? []
                throw SourceError.cameraNotFound(device: device, available: devices.filter { $0.hasPrefix("video") }.sorted().map { "/dev/" + $0 })
            }
            let input = VideoInput(camera: device, frameSize: frameSize, frameRate: frameRate)
            self = .video(try VideoFeed(input, policy: policy), name: (device as NSString).lastPathComponent)
        case let .stdin(width, height):
            try Image.checkSize(width: width, height: height, source: "stdin")
            self = .raw(FrameReader(fd: STDIN_FILENO, width: width, height: height, format: .bgr, source: "stdin"))
        case let .images(urls):
            self = .images(try urls.flatMap { try MediaFiles.expand($0, keeping: MediaFiles.decodable, kind: "JPEG or PNG image") })
        case let .frames(stream):
            self = .frames(stream)
        }
    }

    /// Frames in the source when known beforehand.
    var frameCount: Int? {
        switch self {
        case let .video(feed, _): feed.first.frameCount
        case let .images(urls): urls.count
        case .raw, .frames: nil
        }
    }

    /// Live sources run at their own pace; they may drop frames rather than wait.
    var isLive: Bool {
        switch self {
        case let .video(feed, _): feed.input.isLive
        case .frames: true
        case .raw, .images: false
        }
    }

    var feed: VideoFeed? {
        if case let .video(feed, _) = self { feed } else { nil }
    }

    /// Reads every frame into `queue`, then finishes it with the error the source ended with.
    func produce(into queue: FrameQueue) async {
        if case let .video(feed, name) = self { return await feed.produce(into: queue, name: name) }
        var index = 0
        do {
            switch self {
            case .video:
                break
            case let .raw(reader):
                while let image = try await offload({ [index] in try reader.next(index: index, stopped: { queue.isClosed }) }) {
                    guard await queue.put(Frame(index: index, image: image, name: nil)) else { return }
                    index += 1
                }
            case let .images(urls):
                for url in urls {
                    let image = try await offload { try Image(contentsOf: url) }
                    guard await queue.put(Frame(index: index, image: image, name: url.lastPathComponent)) else { return }
                    index += 1
                }
            case let .frames(stream):
                for await image in stream {
                    guard await queue.put(Frame(index: index, image: image, name: nil)) else { return }
                    index += 1
                }
            }
            queue.finish(nil)
        } catch {
            queue.finish(error)
        }
    }
}

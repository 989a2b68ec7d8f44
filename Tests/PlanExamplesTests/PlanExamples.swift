import Foundation
import YOLOCore

/// The product plan's examples as an app ported from it writes them (`UIImage`/`CGImage` become
/// `Image`), each the body of a function so that the build compiles them. README's Swift
/// snippets are copied from here (`ReadmeSnippetTests` checks it).
enum PlanExamples {
    /// README: loading, a prediction on an `Image`, the annotated image, a camera session.
    static func quickStart() async throws {
        let model = try await YOLO("yolo26n", task: .detect)      // or YOLO(url: remoteURL, task: .detect)
        model.configuration.confidenceThreshold = 0.5              // from the next prediction on
        let image = try Image(contentsOf: URL(fileURLWithPath: "bus.jpg"))
        let result: YOLOResult = try await model.predict(image)
        for box in result.boxes { print(box.name, box.conf, box.xyxy) }
        try result.annotatedImage?.write(to: URL(fileURLWithPath: "bus-annotated.jpg"))
        let session = try YOLOSession(model: model, camera: .back)  // .front, .device(2), .path("/dev/video4")
        for await frame in session.results { print(frame.fps ?? 0, frame.boxes.count) }
    }

    /// README: a session's controls while it runs.
    static func liveControls(_ session: YOLOSession) async throws {
        session.configuration.confidenceThreshold = 0.3
        session.configuration.iouThreshold = 0.45
        session.configuration.maxDetections = 20
        session.pause()                                   // results wait until resume()
        session.resume()
        session.source = .camera(.front)                  // the camera flip: the tracker starts anew
        session.model = try await YOLO.shared("yolo26n-seg")  // cached: loaded once, then free to switch
        session.stop()
    }

    /// The plan's model loading: by name, by URL, each checked against the task at load.
    static func loadModels(remoteURL: URL) async throws -> [YOLO] {
        let detector = try await YOLO("yolo26n", task: .detect)
        let custom = try await YOLO(url: remoteURL, task: .detect)
        return [detector, custom]
    }

    /// The plan's single-image inference on an `Image`, settings first.
    static func detect(_ image: Image, with model: YOLO) async throws -> (YOLOResult, Image?) {
        model.configuration.confidenceThreshold = 0.25
        model.configuration.iouThreshold = 0.7
        model.configuration.maxDetections = 300
        let result = try await model.predict(image)
        return (result, result.annotatedImage)
    }

    /// The plan's session loop: results as they come, paused and resumed, the three settings
    /// changed while it runs, stopped after `limit` results.
    static func runSession(_ session: YOLOSession, limit: Int) async -> [YOLOResult] {
        var results = [YOLOResult]()
        for await result in session.results {
            results.append(result)
            switch results.count {
            case 1:
                session.pause()
                session.configuration.confidenceThreshold = 0.5
                session.configuration.iouThreshold = 0.5
                session.configuration.maxDetections = 1
                session.resume()
            case limit:
                session.stop()
            default:
                break
            }
        }
        return results
    }

    /// VisionEmoji's rules: a class skipped, the lower priority of two overlapping detections
    /// dropped, tracks expired after 1.5 s of source time.
    static func visionEmojiRules(_ session: YOLOSession) {
        session.configuration.excludedClasses = [0]                 // no people
        session.configuration.classPriority = [2: 10, 7: 5]         // a car beats a truck on the same spot
        session.configuration.overlapThreshold = 0.4
        var tracker = TrackerConfiguration.spatial
        tracker.maxTracks = 20
        tracker.expireAfter = 1.5
        session.tracker = tracker
    }
}

import Foundation
import Tensor
import TestSupport
import XCTest
import YOLOCore

/// Final results against Ultralytics 8.4.190 (`reference/<model>/<image>.json`).
final class PredictTests: XCTestCase {
    private func model(_ name: String) async throws -> YOLO {
        try YOLO(contentsOf: weightsFile(name))
    }

    private func iou(_ a: [Float], _ b: [Float]) -> Float {
        let w = max(0, min(a[2], b[2]) - max(a[0], b[0])), h = max(0, min(a[3], b[3]) - max(a[1], b[1]))
        let inter = w * h
        return inter / ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter)
    }

    /// Same boxes in the same order: equal classes, IoU ≥ 0.99, confidence within 0.005.
    private func check(_ modelName: String, _ image: String) async throws {
        let yolo = try await model(modelName)
        let result = try await yolo.predict(try sharedFile("images/\(image).jpg").path)
        let expected = try JSONDecoder().decode(Results.self, from: Data(contentsOf:
            sharedFile("reference/\(modelName)/\(image).json")))
        XCTAssertEqual(result.originalShape, expected.originalShape)
        XCTAssertEqual(result.inputShape, expected.inputShape)
        XCTAssertEqual(result.boxes.map(\.cls), expected.boxes.map(\.cls), "\(modelName)/\(image) classes")
        var worstIoU: Float = 1, worstConf: Float = 0
        for (a, e) in zip(result.boxes, expected.boxes) {
            worstIoU = min(worstIoU, iou(a.xyxy, e.xyxy))
            worstConf = max(worstConf, abs(a.conf - e.conf))
        }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99, "\(modelName)/\(image)")
        XCTAssertLessThanOrEqual(worstConf, 0.005, "\(modelName)/\(image)")
        print("predict \(modelName)/\(image): \(result.boxes.count) boxes, min IoU \(worstIoU), max |Δconf| \(worstConf)")
    }

    func testYOLO26nBus() async throws { try await check("yolo26n", "bus") }
    func testYOLO26nZidane() async throws { try await check("yolo26n", "zidane") }
    func testYOLO11nBusWithNMS() async throws { try await check("yolo11n", "bus") }
    func testYOLO11nZidaneWithNMS() async throws { try await check("yolo11n", "zidane") }

    private func expected(_ modelName: String, _ image: String) throws -> Results {
        try JSONDecoder().decode(Results.self, from: Data(contentsOf:
            sharedFile("reference/\(modelName)/\(image).json")))
    }

    private func predict(_ modelName: String, _ image: String) async throws -> Results {
        try await model(modelName).predict(try sharedFile("images/\(image).jpg").path)
    }

    /// Boxes as `check`, masks IoU ≥ 0.95 against `<image>.masks.safetensors` (input resolution)
    /// where it exists, outlines against the reference polygons.
    private func checkSegment(_ image: String) async throws {
        let result = try await predict("yolo26n-seg", image), reference = try expected("yolo26n-seg", image)
        XCTAssertEqual(result.task, .segment)
        XCTAssertEqual(result.inputShape, reference.inputShape)
        XCTAssertEqual(result.boxes.map(\.cls), reference.boxes.map(\.cls), "segment/\(image) classes")
        XCTAssertEqual(result.masks.count, result.boxes.count)
        var worstIoU: Float = 1, worstConf: Float = 0, worstMask = 1.0, worstArea = 0.0
        for (a, e) in zip(result.boxes, reference.boxes) {
            worstIoU = min(worstIoU, iou(a.xyxy, e.xyxy))
            worstConf = max(worstConf, abs(a.conf - e.conf))
        }
        let file = try sharedFile("reference/yolo26n-seg/\(image).masks.safetensors")
        let masks = try referenceMasks(file)
        let plane = masks.shape[1] * masks.shape[2]
        for (i, mask) in result.masks.enumerated() where i < masks.shape[0] {
            let input = try XCTUnwrap(mask.inputBitmap)
            XCTAssertEqual([input.height, input.width], [masks.shape[1], masks.shape[2]])
            let dense = input.dense()
            var inter = 0, union = 0
            for j in 0..<plane {
                let a = dense[j] != 0, b = masks.bytes[i * plane + j] != 0
                if a && b { inter += 1 }
                if a || b { union += 1 }
            }
            worstMask = min(worstMask, Double(inter) / Double(max(union, 1)))
            // Equal masks have equal outlines (the contour code is exact on Ultralytics' masks).
            if inter == union { XCTAssertEqual(mask.xy, reference.masks[i].xy, "segment/\(image) polygon \(i)") }
            worstArea = max(worstArea, abs(Double(mask.area) / Double(reference.masks[i].area) - 1))
            XCTAssertGreaterThanOrEqual(mask.xy.count, 3)
            let original = try XCTUnwrap(mask.bitmap)
            XCTAssertEqual([original.height, original.width], result.originalShape)
            // The original-resolution mask covers about as much as the input one, scaled.
            let scale = Double(result.originalShape[0] * result.originalShape[1]) / Double(plane - 0)
            XCTAssertEqual(Double(original.area), Double(mask.area) * scale, accuracy: Double(mask.area) * scale * 0.5 + 100)
        }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99, "segment/\(image)")
        XCTAssertLessThanOrEqual(worstConf, 0.005, "segment/\(image)")
        XCTAssertGreaterThanOrEqual(worstMask, 0.95, "segment/\(image) mask IoU")
        print("predict yolo26n-seg/\(image): \(result.boxes.count) masks, min box IoU \(worstIoU), max |Δconf| \(worstConf), "
              + "min mask IoU \(worstMask), max relative area error \(worstArea)")
    }

    func testSegmentBus() async throws { try await checkSegment("bus") }
    func testSegmentZidane() async throws { try await checkSegment("zidane") }

    private func checkPose(_ image: String) async throws {
        let result = try await predict("yolo26n-pose", image), reference = try expected("yolo26n-pose", image)
        XCTAssertEqual(result.task, .pose)
        XCTAssertEqual(result.boxes.map(\.cls), reference.boxes.map(\.cls), "pose/\(image)")
        XCTAssertEqual(result.keypoints.count, reference.keypoints.count)
        var worstIoU: Float = 1, worstConf: Float = 0, worstPixel: Float = 0, worstKeypointConf: Float = 0
        for (a, e) in zip(result.boxes, reference.boxes) {
            worstIoU = min(worstIoU, iou(a.xyxy, e.xyxy))
            worstConf = max(worstConf, abs(a.conf - e.conf))
        }
        for (a, e) in zip(result.keypoints, reference.keypoints) {
            XCTAssertEqual(a.xy.count, 17)
            for k in 0..<17 {
                worstKeypointConf = max(worstKeypointConf, abs(a.conf[k] - e.conf[k]))
                if e.conf[k] >= 0.5 { worstPixel = max(worstPixel, chebyshev(a.xy[k], e.xy[k])) }
            }
        }
        XCTAssertGreaterThanOrEqual(worstIoU, 0.99, "pose/\(image)")
        XCTAssertLessThanOrEqual(worstConf, 0.005, "pose/\(image)")
        XCTAssertLessThanOrEqual(worstPixel, 1.5, "pose/\(image) keypoints (px)")
        XCTAssertLessThanOrEqual(worstKeypointConf, 0.01, "pose/\(image) keypoint confidence")
        print("predict yolo26n-pose/\(image): \(result.boxes.count) people, min box IoU \(worstIoU), max |Δconf| \(worstConf), "
              + "max keypoint error \(worstPixel) px (visible), max |Δ keypoint conf| \(worstKeypointConf)")
    }

    func testPoseBus() async throws { try await checkPose("bus") }
    func testPoseZidane() async throws { try await checkPose("zidane") }

    func testOBBBoats() async throws {
        let result = try await predict("yolo26n-obb", "boats"), reference = try expected("yolo26n-obb", "boats")
        XCTAssertEqual(result.task, .obb)
        XCTAssertEqual(result.inputShape, [1, 3, 576, 1024])
        XCTAssertTrue(result.boxes.isEmpty)
        // Near the confidence threshold an instance may enter or leave; those are compared by
        // matching: every reference box above 0.3 has its counterpart.
        var worstCorner: Float = 0, worstConf: Float = 0, unmatched = 0
        for e in reference.obb {
            let candidates = result.obb.filter { $0.cls == e.cls }
            guard let a = candidates.min(by: { abs($0.xywhr[0] - e.xywhr[0]) + abs($0.xywhr[1] - e.xywhr[1])
                < abs($1.xywhr[0] - e.xywhr[0]) + abs($1.xywhr[1] - e.xywhr[1]) }),
                  abs(a.xywhr[0] - e.xywhr[0]) + abs(a.xywhr[1] - e.xywhr[1]) < 3 else {
                if e.conf > 0.3 { unmatched += 1 }
                continue
            }
            worstConf = max(worstConf, abs(a.conf - e.conf))
            for (p, q) in zip(a.xyxyxyxy, e.xyxyxyxy) { worstCorner = max(worstCorner, chebyshev(p, q)) }
        }
        XCTAssertEqual(unmatched, 0)
        XCTAssertLessThanOrEqual(abs(result.obb.count - reference.obb.count), 3, "\(result.obb.count) vs \(reference.obb.count)")
        XCTAssertLessThanOrEqual(worstCorner, 1.5, "obb corners (px)")
        XCTAssertLessThanOrEqual(worstConf, 0.005)
        print("predict yolo26n-obb/boats: \(result.obb.count) rotated boxes (reference \(reference.obb.count)), "
              + "max corner error \(worstCorner) px, max |Δconf| \(worstConf)")
    }

    private func checkClassify(_ modelName: String, _ image: String) async throws {
        let result = try await predict(modelName, image), reference = try expected(modelName, image)
        XCTAssertEqual(result.task, .classify)
        XCTAssertEqual(result.inputShape, [1, 3, 224, 224])
        let probs = try XCTUnwrap(result.probs), expectedProbs = try XCTUnwrap(reference.probs)
        XCTAssertEqual(probs.top5, expectedProbs.top5, "\(modelName)/\(image) top 5")
        let worst = zip(probs.data, expectedProbs.data).map { abs($0 - $1) }.max() ?? .infinity
        XCTAssertLessThanOrEqual(worst, 1e-3, "\(modelName)/\(image) probabilities")
        print("predict \(modelName)/\(image): \(result.summary)max |Δprob| \(worst)")
    }

    func testClassifyBus() async throws { try await checkClassify("yolo26n-cls", "bus") }
    func testClassifyZidane() async throws { try await checkClassify("yolo26n-cls", "zidane") }
    func testLegacyClassifyBus() async throws { try await checkClassify("yolo11n-cls", "bus") }
    func testLegacyClassifyZidane() async throws { try await checkClassify("yolo11n-cls", "zidane") }

    func testTaskMismatchIsATypedError() async throws {
        let bus = try sharedFile("images/bus.jpg").path
        let detector = try await model("yolo26n")
        XCTAssertEqual(detector.task, .detect)
        for task in [YOLOTask.segment, .pose, .obb, .classify] {
            do {
                _ = try await detector.predict(bus, task: task)
                XCTFail("expected taskMismatch for \(task)")
            } catch let error as YOLOError {
                XCTAssertEqual(error, .taskMismatch(model: "yolo26n.safetensors", task: "detect", requested: task.rawValue))
                XCTAssertEqual(error.errorDescription, "model yolo26n.safetensors is a detect model; it cannot do \(task)")
            }
        }
        let classifier = try await model("yolo26n-cls")
        do {
            _ = try await classifier.predict(bus, task: .detect)
            XCTFail("expected taskMismatch")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .taskMismatch(model: "yolo26n-cls.safetensors", task: "classify", requested: "detect"))
        }
        // A segment model asked for detection gives its boxes without masks.
        let segmenter = try await model("yolo26n-seg")
        let boxes = try await segmenter.predict(bus, task: .detect)
        XCTAssertEqual(boxes.task, .detect)
        XCTAssertTrue(boxes.masks.isEmpty)
        let segmented = try await segmenter.predict(bus, task: .segment)
        XCTAssertEqual(boxes.boxes, segmented.boxes)
    }

    /// `task:` at load: a model that cannot serve it fails before any prediction; one that can
    /// runs it when a prediction asks for none.
    func testTaskMismatchAtLoad() async throws {
        XCTAssertThrowsError(try YOLO(contentsOf: weightsFile("yolo26n"), task: .segment)) { error in
            XCTAssertEqual(error as? YOLOError, .taskMismatch(model: "yolo26n.safetensors", task: "detect", requested: "segment"))
        }
        var store = ModelStore(searchDirectories: [try weightsDirectory()], offline: true)
        store.cacheDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-no-cache")
        do {
            _ = try await YOLO("yolo26n-cls", task: .detect, store: store)
            XCTFail("expected taskMismatch")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .taskMismatch(model: "yolo26n-cls.safetensors", task: "classify", requested: "detect"))
        }
        let segmenter = try await YOLO("yolo26n-seg", task: .detect, store: store)
        XCTAssertEqual(segmenter.task, .segment, "the model's own task")
        let result = try await segmenter.predict(try sharedFile("images/bus.jpg").path)
        XCTAssertEqual(result.task, .detect, "the task given at load")
        XCTAssertTrue(result.masks.isEmpty)
        let segmented = try await segmenter.predict(try sharedFile("images/bus.jpg").path, task: .segment)
        XCTAssertEqual(segmented.task, .segment)
    }

    func testJSONKeysForEveryTask() async throws {
        let cases: [(String, String, String, Set<String>)] = [
            ("yolo26n-seg", "bus", "masks", ["shape", "area", "polygons_xy"]),
            ("yolo26n-pose", "bus", "keypoints", ["xy", "conf"]),
            ("yolo26n-obb", "boats", "obb", ["xywhr", "xyxyxyxy", "conf", "cls", "name"]),
            ("yolo26n-cls", "bus", "probs", ["top5", "top5conf", "data", "top5name"]),
        ]
        for (name, image, key, columns) in cases {
            let result = try await predict(name, image)
            let data = try JSONEncoder().encode(result)
            let object = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
            XCTAssertEqual(Set((object[key] as? [String: Any])?.keys.map { $0 } ?? []), columns, name)
            let decoded = try JSONDecoder().decode(Results.self, from: data)
            XCTAssertEqual(decoded.task, result.task, name)
            XCTAssertEqual(decoded.boxes, result.boxes, name)
            XCTAssertEqual(decoded.keypoints, result.keypoints, name)
            XCTAssertEqual(decoded.obb, result.obb, name)
            XCTAssertEqual(decoded.probs?.top5, result.probs?.top5, name)
            XCTAssertEqual(decoded.masks.map(\.xy), result.masks.map(\.xy), name)
        }
    }

    func testAnnotatedImagesForEveryTask() async throws {
        for (name, image) in [("yolo26n-seg", "bus"), ("yolo26n-pose", "bus"), ("yolo26n-obb", "boats"), ("yolo26n-cls", "bus")] {
            let result = try await predict(name, image)
            let annotated = try result.annotated()
            XCTAssertEqual([annotated.height, annotated.width], result.originalShape)
            XCTAssertNotEqual(annotated, result.image, name)
        }
    }

    /// One model shared by many tasks gives the same results as sequential use.
    func testConcurrentPredictionsMatchSequential() async throws {
        let yolo = try await model("yolo26n")
        let paths = try ["bus", "zidane", "bus", "zidane"].map { try sharedFile("images/\($0).jpg").path }
        var sequential = [[Box]]()
        for path in paths { sequential.append(try await yolo.predict(path).boxes) }
        let concurrent = try await withThrowingTaskGroup(of: (Int, [Box]).self) { group in
            for (i, path) in paths.enumerated() { group.addTask { (i, try await yolo.predict(path).boxes) } }
            var out = [[Box]](repeating: [], count: paths.count)
            for try await (i, boxes) in group { out[i] = boxes }
            return out
        }
        XCTAssertEqual(concurrent, sequential)
    }

    /// Configuration changes apply from the next prediction on.
    func testConfigurationChangesApplyToTheNextPrediction() async throws {
        let yolo = try await model("yolo26n")
        let bus = try sharedFile("images/bus.jpg").path
        let all = try await yolo.predict(bus).boxes
        XCTAssertEqual(all.count, 5)
        yolo.configuration.classes = [5]
        let buses = try await yolo.predict(bus).boxes
        XCTAssertEqual(buses.map(\.name), ["bus"])
        yolo.configuration.classes = nil
        yolo.configuration.confidenceThreshold = 0.9
        let confident = try await yolo.predict(bus).boxes
        XCTAssertEqual(confident.count, 3)
        yolo.configuration.maxDetections = 0
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected a configuration error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .invalidConfiguration(field: "maxDetections", value: "0", reason: "must be at least 1"))
        }
    }

    /// `threads` sets the kernels' thread count for the model's predictions only, and changes
    /// no result; values outside 1…1024 are configuration errors.
    func testThreadsApplyPerModelAndKeepResults() async throws {
        let yolo = try await model("yolo26n")
        let bus = try sharedFile("images/bus.jpg").path
        let reference = try await yolo.predict(bus).boxes
        for threads in [1, 2, 3] {
            yolo.configuration.threads = threads
            let boxes = try await yolo.predict(bus).boxes
            XCTAssertEqual(boxes.map(\.xyxy), reference.map(\.xyxy), "threads \(threads)")
            XCTAssertEqual(boxes.map(\.conf), reference.map(\.conf), "threads \(threads)")
        }
        XCTAssertEqual(Parallel.width, Parallel.defaultWidth, "the process's default is left alone")
        yolo.configuration.threads = 0
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected a configuration error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .invalidConfiguration(field: "threads", value: "0", reason: "must be in 1…1024"))
        }
    }

    /// `fromEnvironment`'s count: `YOLO_NUM_THREADS` (a value outside 1…1024 is an error naming
    /// it), else the first of OpenBLAS's variables in 1…1024, else nil (one per core).
    func testThreadsFromEnvironment() throws {
        let cases: [([String: String], Int?)] = [
            ([:], nil),
            (["YOLO_NUM_THREADS": "3"], 3),
            (["YOLO_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "5", "OMP_NUM_THREADS": "6"], 3),
            (["OPENBLAS_NUM_THREADS": "5", "GOTO_NUM_THREADS": "7", "OMP_NUM_THREADS": "6"], 5),
            (["GOTO_NUM_THREADS": "7", "OMP_NUM_THREADS": "6"], 7),
            (["OMP_NUM_THREADS": "6"], 6),
            (["OPENBLAS_NUM_THREADS": "0", "OMP_NUM_THREADS": "two"], nil),
            (["OPENBLAS_NUM_THREADS": "abc", "OMP_NUM_THREADS": "4"], 4),
        ]
        for (environment, expected) in cases {
            XCTAssertEqual(try YOLOConfiguration.fromEnvironment(environment).threads, expected, "\(environment)")
        }
        for value in ["0", "-2", "two", "", "4 ", "1025"] {
            XCTAssertThrowsError(try YOLOConfiguration.fromEnvironment(["YOLO_NUM_THREADS": value])) {
                XCTAssertEqual($0 as? YOLOError, .invalidConfiguration(field: "YOLO_NUM_THREADS", value: value, reason: "must be an integer in 1…1024"))
            }
        }
    }

    func testErrors() async throws {
        do {
            _ = try await YOLO("no-such-model")
            XCTFail("expected modelNotFound")
        } catch let error as YOLOError {
            guard case .modelNotFound(name: "no-such-model", let searched) = error else { return XCTFail("\(error)") }
            XCTAssertFalse(searched.isEmpty)
        }
        let yolo = try await model("yolo26n")
        do {
            _ = try await yolo.predict("/nonexistent/image.jpg")
            XCTFail("expected an image error")
        } catch {
            XCTAssertFalse((error as? LocalizedError)?.errorDescription?.isEmpty ?? true, "\(error)")
        }
        // A corrupt weight file is an invalidModel error naming the path.
        let corrupt = FileManager.default.temporaryDirectory.appendingPathComponent("corrupt-\(UUID()).safetensors")
        try Data([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]).write(to: corrupt)
        defer { try? FileManager.default.removeItem(at: corrupt) }
        XCTAssertThrowsError(try YOLO(contentsOf: corrupt)) { error in
            guard case .invalidModel(path: corrupt.path, _)? = error as? YOLOError else { return XCTFail("\(error)") }
        }
    }

    /// An image size whose working memory would exceed the budget is refused before any of it is
    /// allocated (imgsz 8192 took 11 GB and a minute, or aborted in malloc under a limit), naming
    /// the largest size that fits; that size then runs.
    func testImageSizeOverTheMemoryBudgetIsRefused() async throws {
        let yolo = try await model("yolo26n")
        let bus = try sharedFile("images/bus.jpg").path
        var config = YOLOConfiguration()
        config.imageSize = 8192
        config.memoryBudget = 2_000_000_000
        yolo.configuration = config
        let before = peakResidentBytes()
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected memoryBudgetExceeded")
        } catch YOLOError.memoryBudgetExceeded(8192, 8192, 6144, let needed, 2_000_000_000, let fits?) {
            XCTAssertGreaterThan(needed, 10_000_000_000, "attention alone takes (256 · 192)² floats")
            XCTAssertEqual(fits % 32, 0)
            XCTAssertTrue((2048..<8192).contains(fits), "\(fits)")
        }
        XCTAssertLessThan(peakResidentBytes() - before, 100_000_000, "the refusal allocated the working memory")
        config.imageSize = 1280
        yolo.configuration = config
        let result = try await yolo.predict(bus)
        XCTAssertEqual(result.inputShape, [1, 3, 1280, 960])
        config.memoryBudget = 1
        yolo.configuration = config
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected memoryBudgetExceeded")
        } catch YOLOError.memoryBudgetExceeded(1280, _, _, _, 1, nil) {}
    }

    private func peakResidentBytes() -> Int {
        var usage = rusage()
        getrusage(__rusage_who_t(RUSAGE_SELF.rawValue), &usage)
        return usage.ru_maxrss * 1024
    }

    func testJSONKeysFollowTheReference() async throws {
        let yolo = try await model("yolo26n")
        var result = try await yolo.predict(try sharedFile("images/bus.jpg").path)
        result.path = "bus.jpg"
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(result)) as? [String: Any])
        XCTAssertEqual(Set(object.keys), ["image", "orig_shape", "input_shape", "speed_ms", "boxes"])
        let boxes = try XCTUnwrap(object["boxes"] as? [String: Any])
        XCTAssertEqual(Set(boxes.keys), ["xyxy", "conf", "cls", "name"])
        XCTAssertEqual(try JSONDecoder().decode(Results.self, from: JSONEncoder().encode(result)).boxes, result.boxes)
    }

    /// End-to-end head settings that Ultralytics passes to the head: top-k of max(max_det, 300)
    /// and one row per anchor when agnostic.
    func testMaxDetectionsAboveThreeHundredAndAgnostic() async throws {
        let yolo = try await model("yolo26n")
        let bus = try sharedFile("images/bus.jpg").path
        yolo.configuration.confidenceThreshold = 0
        yolo.configuration.maxDetections = 1000
        let many = try await yolo.predict(bus).boxes
        XCTAssertEqual(many.count, 1000, "6300 anchors × 80 classes above confidence 0")
        XCTAssertTrue(zip(many, many.dropFirst()).allSatisfy { $0.conf >= $1.conf })
        yolo.configuration.agnosticNMS = true
        let agnostic = try await yolo.predict(bus).boxes
        XCTAssertEqual(agnostic.count, 1000)
        // One row per anchor: no two rows share a box.
        XCTAssertEqual(Set(agnostic.map(\.xyxy)).count, agnostic.count)
        // The default keeps Ultralytics' five detections.
        yolo.configuration = YOLOConfiguration()
        let defaults = try await yolo.predict(bus).boxes
        XCTAssertEqual(defaults.count, 5)
    }

    /// The configuration's line width is what `annotated()` draws with by default.
    func testConfigurationLineWidthReachesTheDrawing() async throws {
        let yolo = try await model("yolo26n")
        let bus = try sharedFile("images/bus.jpg").path
        yolo.configuration.lineWidth = 1
        let thin = try await yolo.predict(bus)
        XCTAssertEqual(thin.lineWidth, 1)
        XCTAssertEqual(try thin.annotated(), try thin.annotated(lineWidth: 1))
        XCTAssertNotEqual(try thin.annotated(), try thin.annotated(lineWidth: 3))
        yolo.configuration.lineWidth = 10
        do {
            _ = try await yolo.predict(bus)
            XCTFail("expected a configuration error")
        } catch let error as YOLOError {
            XCTAssertEqual(error, .invalidConfiguration(field: "lineWidth", value: "10.0", reason: "must be in 0.5…3"))
        }
    }
}

import Dispatch
import Foundation
import YOLOCore

/// `--source`: one image through YOLOCore's whole prediction, as an application pays for it:
/// decoding (from memory, so disk speed stays out), letterbox, forward pass, postprocessing.
struct Pipeline {
    let source: String
    let data: Data
    let yolo: YOLO

    init(source: String, weights: String?, imgsz: Int, precision: YOLOPrecision) throws {
        guard let weights else { throw BenchError("--source needs a weight file: YOLOCore does not run random weights") }
        _ = try Image(contentsOf: URL(fileURLWithPath: source))  // a missing or corrupt image fails before timing
        data = try Data(contentsOf: URL(fileURLWithPath: source))
        var configuration = YOLOConfiguration()
        configuration.imageSize = imgsz
        yolo = try YOLO(contentsOf: URL(fileURLWithPath: weights), configuration: configuration, precision: precision)
        self.source = source
    }

    /// Each stage of `iters` predictions after `warmup` untimed ones.
    func measure(warmup: Int, iters: Int) throws -> PipelineRecord {
        var decode = [Double](), speeds = [Speed](), inputShape = [Int]()
        for i in 0..<(warmup + iters) {
            let start = DispatchTime.now().uptimeNanoseconds
            let image = try Image(data: data)
            let decoded = milliseconds(since: start)
            let result = try yolo(image)
            inputShape = result.inputShape
            if i >= warmup {
                decode.append(decoded)
                speeds.append(result.speed)
            }
        }
        return PipelineRecord(source: source, inputShape: inputShape, decode: Latency(samples: decode),
                              preprocess: Latency(samples: speeds.map(\.preprocess)),
                              inference: Latency(samples: speeds.map(\.inference)),
                              postprocess: Latency(samples: speeds.map(\.postprocess)))
    }
}

/// Per-stage latency of `--source` predictions. The input is the letterboxed image
/// (Ultralytics' minimal stride-aligned rectangle, long side `imgsz`), not imgsz².
struct PipelineRecord: Encodable {
    let source: String
    let inputShape: [Int]
    let decode, preprocess, inference, postprocess: Latency

    var stages: [(name: String, latency: Latency)] {
        [("decode", decode), ("preprocess", preprocess), ("inference", inference), ("postprocess", postprocess)]
    }
}

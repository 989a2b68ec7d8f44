import Foundation
import YOLOCore

/// The response of Ultralytics' hosted inference API (`POST https://predict.ultralytics.com`):
/// `{"images": [{"results": […], "shape": [h, w], "speed": {…}}]}`, each result as Ultralytics'
/// `Results.summary()` gives it (pixels, 5 decimals), so that its clients switch by URL.
struct UltralyticsResponse: Encodable {
    struct ImageResult: Encodable {
        let results: [Detection]
        let shape: [Int]
        let speed: [String: Double]
    }

    /// One row of `Results.summary()`: the class, and for boxes their corners (`x1`…`y4` for
    /// rotated ones), a track ID, the mask outline and the keypoints.
    struct Detection: Encodable {
        let name: String
        let `class`: Int
        let confidence: Double
        var box: [String: Double]?
        var trackID: Int?
        var segments: [String: [Double]]?
        var keypoints: [String: [Double]]?

        enum CodingKeys: String, CodingKey { case name, `class`, confidence, box, trackID = "track_id", segments, keypoints }
    }

    let images: [ImageResult]

    init(_ result: Results) {
        let speed = ["preprocess": result.speed.preprocess, "inference": result.speed.inference, "postprocess": result.speed.postprocess]
        images = [ImageResult(results: Self.summary(result), shape: result.originalShape, speed: speed)]
    }

    /// Python's `round(x, 5)`, on the Float32 values widened as PyTorch's `tolist()` widens them.
    private static func round5(_ value: Float) -> Double { (Double(value) * 1e5).rounded(.toNearestOrEven) / 1e5 }

    private static func corners(_ points: [SIMD2<Float>]) -> [String: Double] {
        var box = [String: Double]()
        for (i, p) in points.enumerated() {
            box["x\(i + 1)"] = round5(p.x)
            box["y\(i + 1)"] = round5(p.y)
        }
        return box
    }

    /// `Results.summary()`: the top 5 classes (classify), else one row per box or rotated box.
    static func summary(_ result: Results) -> [Detection] {
        if let probs = result.probs {
            return zip(probs.top5, probs.top5names).map { Detection(name: $1, class: $0, confidence: round5(probs.data[$0])) }
        }
        if result.task == .obb {
            return result.obb.map {
                Detection(name: $0.name, class: $0.cls, confidence: round5($0.conf), box: corners($0.xyxyxyxy), trackID: $0.id)
            }
        }
        return result.boxes.indices.map { i in
            let box = result.boxes[i]
            var row = Detection(name: box.name, class: box.cls, confidence: round5(box.conf),
                                box: corners([SIMD2(box.xyxy[0], box.xyxy[1]), SIMD2(box.xyxy[2], box.xyxy[3])]), trackID: box.id)
            if i < result.masks.count {
                let xy = result.masks[i].xy
                row.segments = ["x": xy.map { round5($0.x) }, "y": xy.map { round5($0.y) }]
            }
            if i < result.keypoints.count {
                let k = result.keypoints[i]
                row.keypoints = ["x": k.xy.map { round5($0.x) }, "y": k.xy.map { round5($0.y) }]
                if k.conf.count == k.xy.count { row.keypoints?["visible"] = k.conf.map(round5) }
            }
            return row
        }
    }
}

import Foundation
import Tensor

/// The last module: reads its input levels and produces the pass's results.
protocol Head: Module {
    var task: ModelTask { get }
    /// Runs on `input(k)`, the map of the k-th layer of its `from`; the results are maps of `ws`
    /// (`Workspace.result`).
    func forward(_ input: (Int) -> Map, selection: HeadSelection, _ ws: Workspace) -> HeadMaps
}

/// What a model does, from its head.
package enum ModelTask: String, Sendable {
    case detect, segment, pose, obb, classify
}

/// What a head produces for one image.
package struct HeadOutput: Sendable {
    /// The inference output, as Ultralytics' head returns it:
    /// - detect, end-to-end: [1, k, 6] rows of (x1, y1, x2, y2, score, class) in input pixels,
    ///   sorted by score, k = min(300, anchors); segment adds 32 mask coefficients per row, pose
    ///   adds (x, y, visibility) per keypoint in input pixels, obb is (cx, cy, w, h, score,
    ///   class, angle in radians).
    /// - detect, one-to-many (legacy): [1, 4 + nc, anchors] rows of (cx, cy, w, h) then class
    ///   probabilities; segment adds the mask coefficients, pose the keypoints (x, y in input
    ///   pixels, visibility), obb the angle (its boxes rotated cx, cy, w, h).
    /// - classify: [1, nc] probabilities.
    package let output: Tensor
    /// Segmentation prototypes [1, masks, H/4, W/4] (twice the first level's size).
    package let protos: Tensor?
    /// The head's maps before decoding, named like the reference files' `output.1.*`:
    /// "boxes" [1, 4 · regMax, anchors], "scores" (class logits) [1, nc, anchors], and per task
    /// "mask_coefficient", "kpts" or "angle".
    package let raw: [String: Tensor]

    /// Copies of the maps in `head` (without the raw maps unless `raw`).
    package init(_ head: HeadMaps, raw copyRaw: Bool = true) {
        func tensor(_ map: Map) -> Tensor { Tensor(map).reshaped([1, map.channels, map.width]) }
        output = Tensor(head.output).reshaped(head.outputShape)
        protos = head.protos.map { Tensor($0) }
        var raw = [String: Tensor]()
        for (name, map) in copyRaw ?  [("boxes", head.boxes), ("scores", head.scores), ("logits", head.logits)] : [] {
            if let map { raw[name] = name == "logits" ? Tensor(map).reshaped([1, map.width]) : tensor(map) }
        }
        if copyRaw, let (name, map) = head.extra { raw[name] = tensor(map) }
        self.raw = raw
    }
}

/// A head's results in its workspace (`Workspace.result`), valid until the workspace's next pass: `HeadOutput`'s
/// tensors as maps whose height is 1 (a [1, c, n] tensor is a map of c channels of width n).
package struct HeadMaps {
    /// `HeadOutput.output`; rank 2 ([1, n], classify) or 3.
    package let output: Map
    package let outputRank: Int
    /// `HeadOutput.output`'s shape.
    package var outputShape: [Int] { outputRank == 2 ? [1, output.width] : [1, output.channels, output.width] }
    package let protos: Map?
    /// The raw maps: detect heads' boxes, scores and task extra; Classify's logits.
    package let boxes: Map?, scores: Map?, logits: Map?
    package let extra: (name: String, map: Map)?
}

/// How an end-to-end head picks its detections (Ultralytics sets these on the head from the
/// predict arguments).
package struct HeadSelection: Sendable, Equatable {
    /// Rows kept by the top-k: Ultralytics uses max(max_det, 300).
    package var maxDetections = 300
    /// One row per anchor (its best class) instead of the best (anchor, class) pairs.
    package var agnostic = false

    package init(maxDetections: Int = 300, agnostic: Bool = false) {
        self.maxDetections = maxDetections
        self.agnostic = agnostic
    }
}

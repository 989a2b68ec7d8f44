/// Steadier boxes for overlays: an exponential moving average, per track ID, of each tracked
/// box's centre, size and confidence. Only what is drawn changes; the tracker's boxes and IDs
/// stay as they are.
///
/// ```swift
/// var smoother = try BoxSmoother(factor: 0.4)
/// let shown = smoother.smooth(tracker.update(boxes))   // draw `shown`, keep the tracker's boxes
/// ```
public struct BoxSmoother: Sendable {
    /// Weight of the newest box in (0, 1]: `smoothed = factor · new + (1 − factor) · previous`;
    /// 1 draws the boxes as they are.
    public let factor: Float
    private struct Average: Sendable {
        var centre: SIMD2<Float>, size: SIMD2<Float>, conf: Float
    }
    private var averages = [Int: Average]()

    /// - Throws: `YOLOError.invalidConfiguration` when `factor` is not in (0, 1].
    public init(factor: Float = 0.5) throws {
        guard factor > 0, factor <= 1 else {
            throw YOLOError.invalidConfiguration(field: "factor", value: "\(factor)", reason: "must be in (0, 1]")
        }
        self.factor = factor
    }

    /// The boxes of the next frame, averaged with the earlier ones of the same ID. Boxes without
    /// an ID pass unchanged; an ID missing from a frame starts afresh when it comes back.
    public mutating func smooth(_ boxes: [Box]) -> [Box] {
        var next = [Int: Average]()
        let smoothed = boxes.map { box -> Box in
            guard let id = box.id, box.xyxy.count == 4 else { return box }
            let b = box.xywh
            var average = Average(centre: SIMD2(b[0], b[1]), size: SIMD2(b[2], b[3]), conf: box.conf)
            if let previous = averages[id] {
                average.centre = factor * average.centre + (1 - factor) * previous.centre
                average.size = factor * average.size + (1 - factor) * previous.size
                average.conf = factor * average.conf + (1 - factor) * previous.conf
            }
            next[id] = average
            let low = average.centre - average.size / 2, high = average.centre + average.size / 2
            return Box(xyxy: [low.x, low.y, high.x, high.y], conf: average.conf, cls: box.cls, name: box.name,
                       originalShape: box.originalShape, id: id)
        }
        averages = next
        return smoothed
    }
}

import Foundation

/// Where tracked objects have been, as Ultralytics 8.4.190's `solutions.Heatmap`: each frame adds
/// 2 to every pixel of a disc in each tracked box (centred in the box, its diameter the box's
/// shorter side, in whole pixels); the heat is drawn normalized to 0…255 through a colour map,
/// half and half over the frame. With a region it also counts as `ObjectCounter` does.
///
/// ```swift
/// var heatmap = try Heatmap(decay: 0.99)
/// heatmap.update(try tracker.update(frame), retiredIDs: tracker.removedTracks.map(\.id))
/// try heatmap.annotated(frame).write(to: URL(fileURLWithPath: "heat.jpg"))
/// ```
public struct Heatmap: Sendable {
    /// Heat is multiplied by this before each frame adds to it: 1 (Ultralytics) keeps it all,
    /// less lets old paths fade.
    public let decay: Float
    /// The counter when a region was given.
    public private(set) var counter: ObjectCounter?
    /// The heat per pixel, rows top to bottom, once a frame was seen.
    public private(set) var heat = [Float]()
    public private(set) var width = 0, height = 0

    /// - Throws: `SolutionError.invalidArgument` for a decay outside 0…1.
    public init(region: SolutionRegion? = nil, decay: Float = 1) throws {
        guard decay > 0, decay <= 1 else {
            throw SolutionError.invalidArgument(name: "decay", value: "\(decay)", reason: "must be in (0, 1]")
        }
        self.decay = decay
        counter = region.map(ObjectCounter.init)
    }

    /// Adds the next frame's tracked boxes (boxes without an ID are ignored) and, with a region,
    /// counts them after forgetting `retiredIDs`. The heat map takes the first frame's size;
    /// a frame of another size starts it again.
    /// - Returns: the counts when counting, else nil.
    @discardableResult
    public mutating func update(_ results: Results, retiredIDs: [Int] = []) -> ObjectCounter.Counts? {
        let h = results.originalShape.first ?? 0, w = results.originalShape.count > 1 ? results.originalShape[1] : 0
        if w != width || h != height {
            (width, height) = (w, h)
            heat = [Float](repeating: 0, count: w * h)
        } else if decay < 1 {
            for i in heat.indices { heat[i] *= decay }
        }
        for (_, box) in trackedBoxes(results) where box.xyxy.allSatisfy(\.isFinite) {
            // Corners truncated to whole pixels and clipped, as Ultralytics' int() and bounds.
            let c = box.xyxy.map(pixel)
            let x0 = max(c[0], 0), y0 = max(c[1], 0), x1 = min(c[2], width), y1 = min(c[3], height)
            guard x0 < x1, y0 < y1 else { continue }
            let r = min(x1 - x0, y1 - y0) / 2, cx = (x0 + x1) / 2, cy = (y0 + y1) / 2
            for y in y0..<y1 {
                for x in x0..<x1 where (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r { heat[y * width + x] += 2 }
            }
        }
        return counter?.update(results, retiredIDs: retiredIDs)
    }

    /// The frame with the tracked boxes (and the region and counts when counting), blended half
    /// and half with the heat normalized to 0…255 through OpenCV's `COLORMAP_DEEPGREEN` (within
    /// one level), once there is heat.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try counter?.annotated(results) ?? results.solutionCanvas()
        guard canvas.width == width, canvas.height == height, let low = heat.min(), let high = heat.max(), high > 0 else {
            return canvas
        }
        // cv2.normalize(NORM_MINMAX) then astype(uint8), truncating.
        let scale = high > low ? 255 / (Double(high) - Double(low)) : 0
        for i in heat.indices {
            let level = Int(min(max((Double(heat[i]) - Double(low)) * scale, 0), 255))
            let colour = [max(0, 3 * (level - 170)), level, max(0, 3 * (level - 85) / 2)]
            for ch in 0..<3 {
                // cv2.addWeighted(0.5, 0.5) rounds half to even.
                let sum = Int(canvas.pixels[i * 3 + ch]) + colour[ch]
                canvas.pixels[i * 3 + ch] = UInt8(sum / 2 + (sum % 4 == 3 ? 1 : 0))
            }
        }
        return canvas
    }
}

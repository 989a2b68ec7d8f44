import Foundation

/// Tracks only what is inside a zone, as Ultralytics 8.4.190's `solutions.TrackZone`: the zone is
/// the convex hull of the region's points (truncated to whole pixels), and the model sees each
/// frame with everything outside the zone blacked out (`masked`), so objects outside are never
/// detected and those on its edge are boxed by their visible part.
///
/// ```swift
/// let zone = try TrackZone(region: SolutionRegion([[160, 90], [480, 90], [480, 270], [160, 270]]))
/// let tracked = try tracker.update(try model(zone.masked(frame)))
/// ```
public struct TrackZone: Sendable {
    /// One frame's tracks.
    public struct Tracks: Sendable, Equatable, Codable {
        public var frame: Int?
        /// IDs of the tracks in this frame, in track order.
        public var ids = [Int]()
    }

    /// The zone: the convex hull of the region's points, in order around it.
    public let zone: SolutionRegion
    public private(set) var tracks = Tracks()

    /// - Parameter region: by default Ultralytics' zone, (75, 75)–(565, 285).
    /// - Throws: `SolutionError.invalidRegion` when the hull has no area (a line, or points on one).
    public init(region: SolutionRegion? = nil) throws {
        let points = region?.points ?? [[75, 75], [565, 75], [565, 285], [75, 285]]
        // Whole pixels as int32 makes them; bounded so that pixel arithmetic cannot overflow.
        let hull = convexHull(points.map { p in
            SIMD2(min(max(p.x, -1e6), 1e6).rounded(.towardZero), min(max(p.y, -1e6), 1e6).rounded(.towardZero))
        })
        guard hull.count >= 3 else {
            throw SolutionError.invalidRegion(region?.description ?? "", reason: "the zone needs three points not on one line")
        }
        zone = try SolutionRegion(hull)
    }

    /// `image` with every pixel outside the zone black, as `cv2.fillPoly` masks it: in each row
    /// the pixels from the zone's left edge to its right edge, both rounded, are kept.
    public func masked(_ image: Image) -> Image {
        var out = Image(width: image.width, height: image.height, rgb: [UInt8](repeating: 0, count: image.pixels.count))
        let p = zone.points
        let top = max(Int(p.map(\.y).min()!), 0), bottom = min(Int(p.map(\.y).max()!), image.height - 1)
        guard top <= bottom else { return out }
        for y in top...bottom {
            let row = Double(y)
            var left = Double.infinity, right = -Double.infinity
            for (a, b) in zip(p, p.dropFirst() + [p[0]]) where min(a.y, b.y) <= row && row <= max(a.y, b.y) {
                let xs = a.y == b.y ? [a.x, b.x] : [a.x + (row - a.y) * (b.x - a.x) / (b.y - a.y)]
                left = min(left, xs.min()!)
                right = max(right, xs.max()!)
            }
            let x0 = max(Int((left + 0.5).rounded(.down)), 0), x1 = min(Int((right + 0.5).rounded(.down)), image.width - 1)
            guard x0 <= x1 else { continue }
            let range = (y * image.width + x0) * 3..<(y * image.width + x1 + 1) * 3
            out.pixels[range] = image.pixels[range]
        }
        return out
    }

    /// The tracks of the next frame, predicted on `masked(frame)` (boxes without an ID are
    /// ignored).
    @discardableResult
    public mutating func update(_ results: Results) -> Tracks {
        tracks = Tracks(frame: results.frame, ids: trackedBoxes(results).map(\.id))
        return tracks
    }

    /// The frame the model saw (masked outside the zone when it came through `masked`) with the
    /// zone's outline and the tracked boxes.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try results.solutionCanvas()
        canvas.drawRegion(zone, color: RGB(0xFFFFFF), thickness: 4)
        return canvas
    }
}

/// Andrew's monotone chain: the hull's corners in order around it, collinear points dropped.
private func convexHull(_ points: [SIMD2<Double>]) -> [SIMD2<Double>] {
    let sorted = Array(Set(points.map { [$0.x, $0.y] })).sorted { ($0[0], $0[1]) < ($1[0], $1[1]) }.map { SIMD2($0[0], $0[1]) }
    guard sorted.count >= 3 else { return sorted }
    func turn(_ o: SIMD2<Double>, _ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Double {
        (a.x - o.x) * (b.y - o.y) - (a.y - o.y) * (b.x - o.x)
    }
    var lower = [SIMD2<Double>](), upper = [SIMD2<Double>]()
    for p in sorted {
        while lower.count >= 2, turn(lower[lower.count - 2], lower[lower.count - 1], p) <= 0 { lower.removeLast() }
        lower.append(p)
    }
    for p in sorted.reversed() {
        while upper.count >= 2, turn(upper[upper.count - 2], upper[upper.count - 1], p) <= 0 { upper.removeLast() }
        upper.append(p)
    }
    return Array(lower.dropLast() + upper.dropLast())
}

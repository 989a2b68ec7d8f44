import Foundation

/// A line (two points) or a polygon (three or more) in frame pixels, with the shapely predicates
/// Ultralytics 8.4.190's solutions decide with: a segment `intersects` the line (touching counts),
/// a polygon `contains` a point (its interior only, not its edges), a segment `crosses` a polygon
/// (it has points both inside and outside). Points are `[x, y]` literals:
///
/// ```swift
/// let line = try SolutionRegion([[320, 0], [320, 360]])
/// let zone = try SolutionRegion(parsing: "160,90,480,90,480,270,160,270")
/// ```
public struct SolutionRegion: Sendable, Equatable, CustomStringConvertible {
    public let points: [SIMD2<Double>]

    /// - Throws: `SolutionError.invalidRegion` for fewer than two points, a coordinate that is
    ///   not finite, or a line whose two points are the same.
    public init(_ points: [SIMD2<Double>]) throws {
        let text = Self.describe(points)
        guard points.count >= 2 else {
            throw SolutionError.invalidRegion(text, reason: "needs two points for a line or three or more for a polygon")
        }
        guard points.allSatisfy({ $0.x.isFinite && $0.y.isFinite }) else {
            throw SolutionError.invalidRegion(text, reason: "a coordinate is not a finite number")
        }
        guard points.count > 2 || points[0] != points[1] else {
            throw SolutionError.invalidRegion(text, reason: "the line's two points are the same")
        }
        self.points = points
    }

    /// "x1,y1,x2,y2[,…]" as the command line takes it.
    public init(parsing text: String) throws {
        let numbers = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { Double($0.trimmingCharacters(in: .whitespaces)) }
        guard numbers.count % 2 == 0, numbers.allSatisfy({ $0 != nil }) else {
            throw SolutionError.invalidRegion(text, reason: "not a list of x,y pairs such as 320,0,320,360")
        }
        try self.init(stride(from: 0, to: numbers.count, by: 2).map { SIMD2(numbers[$0]!, numbers[$0 + 1]!) })
    }

    /// "(x1, y1), (x2, y2), …".
    public var description: String { Self.describe(points) }

    private static func describe(_ points: [SIMD2<Double>]) -> String {
        points.map { "(\($0.x), \($0.y))" }.joined(separator: ", ")
    }

    /// Two points: a counting line.
    public var isLine: Bool { points.count == 2 }

    /// Width and height of the bounding rectangle.
    var extent: SIMD2<Double> {
        points.dropFirst().reduce(points[0]) { pointwiseMax($0, $1) } - points.dropFirst().reduce(points[0]) { pointwiseMin($0, $1) }
    }

    /// Whether `p` lies strictly inside the polygon (even-odd rule), off its edges; a line
    /// contains nothing.
    public func contains(_ p: SIMD2<Double>) -> Bool {
        guard !isLine else { return false }
        var inside = false
        for (a, b) in edges {
            if onSegment(p, a, b) { return false }
            if (a.y > p.y) != (b.y > p.y), p.x < a.x + (p.y - a.y) * (b.x - a.x) / (b.y - a.y) { inside.toggle() }
        }
        return inside
    }

    /// Whether the segment from `a` to `b` meets the line or the polygon's edges, ends included.
    public func intersects(_ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Bool {
        edges.contains { segmentsMeet(a, b, $0.0, $0.1) } || (!isLine && (contains(a) || contains(b)))
    }

    /// Whether the segment from `a` to `b` has points both inside the polygon and outside it
    /// (shapely's `crosses` for a line and a polygon). Between the points where it meets the
    /// edges it is wholly inside or outside, so the middle of each piece decides.
    public func crosses(_ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Bool {
        guard !isLine, a != b else { return false }
        let r = b - a
        var cuts: [Double] = [0, 1]
        for (c, d) in edges {
            let s = d - c, denominator = cross(r, s), offset = c - a
            if denominator != 0 {
                let t = cross(offset, s) / denominator, u = cross(offset, r) / denominator
                if u >= 0, u <= 1, t > 0, t < 1 { cuts.append(t) }
            } else if cross(offset, r) == 0 {
                for e in [c, d] {
                    let t = ((e - a) * r).sum() / (r * r).sum()
                    if t > 0, t < 1 { cuts.append(t) }
                }
            }
        }
        cuts.sort()
        var inside = false, outside = false
        for (t0, t1) in zip(cuts, cuts.dropFirst()) where t1 > t0 {
            let m = a + r * ((t0 + t1) / 2)
            if contains(m) { inside = true } else if !edges.contains(where: { onSegment(m, $0.0, $0.1) }) { outside = true }
        }
        return inside && outside
    }

    /// The line itself, or the polygon's closed outline.
    private var edges: [(SIMD2<Double>, SIMD2<Double>)] {
        isLine ? [(points[0], points[1])] : points.indices.map { (points[$0], points[($0 + 1) % points.count]) }
    }
}

/// A solution's argument out of range or a region it cannot use.
public enum SolutionError: Error, LocalizedError, Equatable {
    case invalidRegion(String, reason: String)
    case invalidArgument(name: String, value: String, reason: String)

    public var errorDescription: String? {
        switch self {
        case let .invalidRegion(region, reason): "region \(region): \(reason)"
        case let .invalidArgument(name, value, reason): "\(name) = \(value): \(reason)"
        }
    }
}

private func cross(_ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Double { a.x * b.y - a.y * b.x }

/// `p` on the closed segment from `a` to `b`.
private func onSegment(_ p: SIMD2<Double>, _ a: SIMD2<Double>, _ b: SIMD2<Double>) -> Bool {
    cross(b - a, p - a) == 0 && p.x >= min(a.x, b.x) && p.x <= max(a.x, b.x) && p.y >= min(a.y, b.y) && p.y <= max(a.y, b.y)
}

/// Closed segments `ab` and `cd` share a point (collinear overlaps and touching ends included).
private func segmentsMeet(_ a: SIMD2<Double>, _ b: SIMD2<Double>, _ c: SIMD2<Double>, _ d: SIMD2<Double>) -> Bool {
    let d1 = cross(d - c, a - c), d2 = cross(d - c, b - c), d3 = cross(b - a, c - a), d4 = cross(b - a, d - a)
    if ((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0)) { return true }
    return onSegment(a, c, d) || onSegment(b, c, d) || onSegment(c, a, b) || onSegment(d, a, b)
}

/// Each track's recent box centres, as Ultralytics' `BaseSolution.track_history`: the last 30,
/// dropped when the tracker retires the track.
struct TrackHistory: Sendable {
    static let length = 30
    private(set) var centres = [Int: [SIMD2<Double>]]()

    /// Appends `box`'s centre (the mean of its corners in Float32, as torch takes it) and returns
    /// the track's centres, the newest last.
    mutating func record(_ id: Int, _ box: Box) -> [SIMD2<Double>] {
        var line = centres[id, default: []]
        line.append(centre(box))
        if line.count > Self.length { line.removeFirst() }
        centres[id] = line
        return line
    }

    mutating func forget(_ ids: [Int]) {
        for id in ids { centres[id] = nil }
    }
}

/// A box's centre in Float32 arithmetic, as Ultralytics computes it from the tensor.
func centre(_ box: Box) -> SIMD2<Double> {
    SIMD2(Double((box.xyxy[0] + box.xyxy[2]) / 2), Double((box.xyxy[1] + box.xyxy[3]) / 2))
}

/// The boxes a solution works on: those with a track ID (and four coordinates). A frame without
/// tracks (the tracker reported raw detections) gives none, as Ultralytics' `extract_tracks` does.
func trackedBoxes(_ results: Results) -> [(id: Int, box: Box)] {
    results.boxes.compactMap { box in box.xyxy.count == 4 ? box.id.map { ($0, box) } : nil }
}

extension Image {
    /// The region's outline (a line, or a closed polygon), `thickness` pixels wide.
    mutating func drawRegion(_ region: SolutionRegion, color: RGB, thickness: Int) {
        let p = region.points.map { SIMD2<Float>(Float($0.x), Float($0.y)) }
        for i in 0..<(region.isLine ? 1 : p.count) {
            drawLine(p[i], p[(i + 1) % p.count], thickness: thickness, color: color)
        }
    }
}

extension Image {
    /// Lines of text in the top-right corner, clear of the box labels along the top-left.
    mutating func drawPanel(_ lines: [String]) {
        let widest = lines.map { Self.textSize($0, scale: 2).width }.max() ?? 0
        drawTextLines(lines, x: width - widest - 4 - 10, y: 10, scale: 2)
    }
}

extension Results {
    /// The frame with its tracked boxes drawn as Ultralytics' solutions draw them (line width 2).
    func solutionCanvas() throws -> Image { try annotated(lineWidth: 2) }
}

/// The frame of `results`, to draw on.
func solutionImage(_ results: Results) throws -> Image {
    guard let image = results.image else {
        throw YOLOError.invalidImage(source: results.path ?? "result", reason: "the result holds no image to draw on")
    }
    return image
}

import Foundation

/// Counts the tracked objects inside each of several named polygons in every frame, as
/// Ultralytics 8.4.190's `solutions.RegionCounter`: an object is in a region when its box centre
/// lies strictly inside the polygon; regions may overlap.
///
/// ```swift
/// var counter = try RegionCounter(regions: [("left", SolutionRegion([[0, 0], [320, 0], [320, 360], [0, 360]]))])
/// let counts = counter.update(try tracker.update(frame))   // ["left": 2]
/// ```
public struct RegionCounter: Sendable {
    /// One frame's counts.
    public struct Counts: Sendable, Equatable, Codable {
        public var frame: Int?
        /// Objects in each region, by name, every region listed.
        public var regions = [String: Int]()
        /// Tracks in this frame.
        public var tracks = 0
    }

    /// The regions in the order given; names are unique.
    public let regions: [(name: String, region: SolutionRegion)]
    public private(set) var counts = Counts()

    /// - Throws: `SolutionError.invalidRegion` for a region that is a line and
    ///   `.invalidArgument` for no region or a name given twice.
    public init(regions: [(name: String, region: SolutionRegion)]) throws {
        guard !regions.isEmpty else {
            throw SolutionError.invalidArgument(name: "regions", value: "[]", reason: "give at least one polygon")
        }
        for (name, region) in regions where region.isLine {
            throw SolutionError.invalidRegion(name, reason: "a region counter needs a polygon of three or more points")
        }
        if let twice = Dictionary(grouping: regions.map(\.name), by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw SolutionError.invalidArgument(name: "regions", value: twice, reason: "the name is given twice")
        }
        self.regions = regions
    }

    /// The objects of the next frame in each region (boxes without an ID are ignored).
    @discardableResult
    public mutating func update(_ results: Results) -> Counts {
        let centres = trackedBoxes(results).map { centre($0.box) }
        counts = Counts(frame: results.frame,
                        regions: Dictionary(uniqueKeysWithValues: regions.map { r in (r.name, centres.filter(r.region.contains).count) }),
                        tracks: centres.count)
        return counts
    }

    /// The frame with the tracked boxes, each region in its colour and its count beside its name.
    public func annotated(_ results: Results) throws -> Image {
        var canvas = try results.solutionCanvas()
        for (i, (name, region)) in regions.enumerated() {
            canvas.drawRegion(region, color: classColor(i), thickness: 4)
            let centre = region.points.reduce(.zero, +) / Double(region.points.count)
            canvas.drawLabel("\(name): \(counts.regions[name] ?? 0)", x: pixel(Float(centre.x)), y: pixel(Float(centre.y)), lineWidth: 2)
        }
        return canvas
    }
}

/// One image's [C, H, W] map in memory its caller manages (a workspace's arena, or a tensor's
/// storage held for the call): what the kernels read and write without allocating.
package struct Map {
    package let base: UnsafeMutablePointer<Float>
    package let channels: Int, height: Int, width: Int
    /// Bounds of its floats, when the code that wrote them measured them (an int8 convolution
    /// does, as it stores them) and set them on the value it returns, or the caller knows them (a
    /// network's input): an int8 convolution reading it then skips its range pass. nil: unknown.
    /// Views (`channels(_:)`) and new `Map`s have none; a copy keeps it, so code that writes into
    /// a map passes on the value the writer returned, never an older copy.
    package var range: ValueRange?

    package init(_ base: UnsafeMutablePointer<Float>, channels: Int, height: Int, width: Int) {
        (self.base, self.channels, self.height, self.width) = (base, channels, height, width)
    }

    /// This map with `range` as its floats' bounds.
    package func bounded(by range: ValueRange?) -> Map {
        var map = self
        map.range = range
        return map
    }

    package var plane: Int { height * width }
    package var count: Int { channels * plane }

    /// Channels `range` of this map (contiguous in this layout).
    package func channels(_ range: Range<Int>) -> Map {
        precondition(range.lowerBound >= 0 && range.upperBound <= channels, "channels \(range) of \(channels)")
        return Map(base + range.lowerBound * plane, channels: range.count, height: height, width: width)
    }

    /// The same size.
    package func hasShape(of other: Map) -> Bool {
        channels == other.channels && height == other.height && width == other.width
    }

    /// Copies this map's scalars to `y` (same count).
    package func write(to y: Map) {
        precondition(count == y.count, "write: \(count) scalars into \(y.count)")
        copy(base, y.base, count: count)
    }
}

/// The smallest and largest of a map's floats, or bounds of them.
package struct ValueRange: Equatable, Sendable {
    package var lower: Float, upper: Float

    package init(lower: Float, upper: Float) { (self.lower, self.upper) = (lower, upper) }

    /// Bounds of both maps' floats (a concatenation's); nil if either is unknown.
    package static func union(_ a: ValueRange?, _ b: ValueRange?) -> ValueRange? {
        guard let a, let b else { return nil }
        return ValueRange(lower: min(a.lower, b.lower), upper: max(a.upper, b.upper))
    }
}

extension Tensor {
    /// `body` with image `image` of this [N, C, H, W] tensor as a map (read only).
    package func withMap<R>(image: Int = 0, _ body: (Map) throws -> R) rethrows -> R {
        precondition(rank == 4 && image < shape[0], "withMap: image \(image) of \(shape)")
        let (c, h, w) = (shape[1], shape[2], shape[3])
        return try scalars.withUnsafeBufferPointer {
            try body(Map(UnsafeMutablePointer(mutating: $0.baseAddress!) + image * c * h * w, channels: c, height: h, width: w))
        }
    }

    /// A [1, C, H, W] tensor holding a copy of `map`.
    package init(_ map: Map) {
        self.init(shape: [1, map.channels, map.height, map.width]) { $0.baseAddress!.initialize(from: map.base, count: map.count) }
    }
}

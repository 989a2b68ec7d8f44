import Tensor
import TestSupport
import XCTest

final class MapTests: XCTestCase {
    /// Channel ranges of a map are contiguous views; `write(to:)` copies (split over the threads
    /// at 1 << 15 floats and more), as the graph fills a concatenation.
    func testMapChannelsAndWrite() throws {
        try BLAS.load()
        let saved = Parallel.width
        defer { Parallel.width = saved }
        for (channels, h, w) in [(3, 7, 13), (13, 127, 130)] {
            let x = randomTensor([1, channels, h, w], seed: UInt64(channels))
            var y = Tensor(zeros: [1, channels + 2, h, w])
            for threads in [1, 2] {
                Parallel.width = threads
                y.scalars.withUnsafeMutableBufferPointer { yb in
                    let whole = Map(yb.baseAddress!, channels: channels + 2, height: h, width: w)
                    x.withMap { $0.write(to: whole.channels(1..<(channels + 1))) }
                }
                XCTAssertEqual(Array(y.scalars[(h * w)..<((channels + 1) * h * w)]), x.scalars, "\(channels)×\(h)×\(w), \(threads) threads")
                XCTAssertTrue(y.scalars[..<(h * w)].allSatisfy { $0 == 0 } && y.scalars[((channels + 1) * h * w)...].allSatisfy { $0 == 0 })
            }
        }
    }
}

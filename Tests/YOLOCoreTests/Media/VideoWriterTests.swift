import Foundation
import TestSupport
import XCTest
import YOLOCore

/// `VideoWriter`: annotated frames into an H.264 file through ffmpeg, and its failures.
final class VideoWriterTests: XCTestCase {
    private func probe(_ url: URL) throws -> String {
        try runTool(["ffprobe", "-v", "error", "-count_frames", "-show_entries",
                     "stream=codec_name,width,height,avg_frame_rate,nb_read_frames", "-of", "csv=p=0", url.path]).output
    }

    func testFramesOfAnOddSizeBecomeAnH264File() throws {
        let url = try Fixtures.temporaryDirectory(self).appendingPathComponent("out.mp4")
        let writer = try VideoWriter(url: url, width: 33, height: 17, frameRate: 12.5)
        for i in 0..<5 {
            try writer.write(try Image(pixels: [UInt8](repeating: UInt8(i * 50), count: 33 * 17 * 3), width: 33, height: 17, format: .rgb))
        }
        XCTAssertThrowsError(try writer.write(try Image(pixels: [0, 0, 0], width: 1, height: 1, format: .rgb))) { error in
            XCTAssertEqual(error as? VideoWriterError,
                           .invalidSize(file: url.path, reason: "frame 1×1 differs from the video's 33×17"))
        }
        try writer.finish()
        XCTAssertEqual(try probe(url), "h264,34,18,25/2,5\n", "odd sides padded by one pixel")
    }

    func testBadSizesRatesAndPathsAreTypedErrors() throws {
        let url = URL(fileURLWithPath: "/nonexistent/out.mp4")
        for (width, height, rate) in [(0, 10, 25.0), (10, 20000, 25), (10, 10, 0), (10, 10, .nan)] {
            XCTAssertThrowsError(try VideoWriter(url: url, width: width, height: height, frameRate: rate)) { error in
                guard case .invalidSize = error as? VideoWriterError else { return XCTFail("\(width)×\(height) at \(rate): \(error)") }
            }
        }
        // ffmpeg cannot create the file: the failure names the path and ffmpeg's reason.
        let writer = try VideoWriter(url: url, width: 16, height: 16, frameRate: 25)
        let frame = try Image(pixels: [UInt8](repeating: 0, count: 16 * 16 * 3), width: 16, height: 16, format: .rgb)
        var failure: (any Error)?
        do {
            for _ in 0..<100 { try writer.write(frame) }
            try writer.finish()
        } catch {
            failure = error
        }
        guard case let .encodeFailed(file, _, reason) = failure as? VideoWriterError else {
            return XCTFail("expected encodeFailed, got \(String(describing: failure))")
        }
        XCTAssertEqual(file, url.path)
        XCTAssertTrue(reason.contains("No such file or directory"), reason)
    }
}

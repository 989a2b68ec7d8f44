import Foundation
import TestSupport
import XCTest
import YOLOCore
import YOLOServer

/// The live view (`GET /`) in headless Chromium, its camera a fake one playing pan.mp4, driven
/// through the DevTools protocol by Tests/LiveView/drive.py.
final class LiveViewTests: XCTestCase {
    /// The page loads without a console error, draws boxes on ≥ 10 frames, shows FPS and
    /// latency; the confidence slider at 0.9 draws fewer boxes; the SEGMENT tab draws masks; the
    /// screenshot of the preview has lime (#CFFF1A) box pixels. The screenshot is kept in
    /// .build/artifacts/live-view.png.
    func testPageInHeadlessChromium() async throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-live-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        let camera = scratch.appendingPathComponent("pan.y4m"), screenshot = scratch.appendingPathComponent("live-view.png")
        let ffmpeg = try runTool(["ffmpeg", "-nostdin", "-v", "error", "-y", "-i", try sharedFile("videos/pan.mp4").path,
                                 "-t", "3", "-vf", "scale=640:360", "-pix_fmt", "yuv420p", camera.path])
        XCTAssertEqual(ffmpeg.status, 0, ffmpeg.output)
        let driver = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("LiveView/drive.py")
        let browser = try await withServer { client in
            try await runToolAsync(["python3", driver.path, "http://127.0.0.1:\(try XCTUnwrap(client.port))/", camera.path, screenshot.path])
        }
        let report = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(browser.output.utf8)) as? [String: Any], browser.output)
        XCTAssertEqual(browser.status, 0, browser.output)
        XCTAssertEqual((report["console_errors"] as? [String])?.isEmpty, true, browser.output)
        for field in ["fps", "latency"] {
            let text = try XCTUnwrap(report[field] as? String, field)
            XCTAssertNotNil(Double(text.replacingOccurrences(of: " ms", with: "")), "\(field) shows a number: \(text)")
        }
        XCTAssertEqual(report["toast"] as? String, "CONFIDENCE THRESHOLD: 0.90")
        let before = try XCTUnwrap(report["boxes_at_default"] as? Int), after = try XCTUnwrap(report["boxes_at_0.9"] as? Int)
        XCTAssertLessThan(after, before, "confidence 0.9 draws fewer boxes")
        XCTAssertGreaterThan(try XCTUnwrap(report["masks_drawn"] as? Int), 0)
        XCTAssertEqual(report["model"] as? String, "yolo26n-seg")
        let image = try Image(contentsOf: screenshot)
        let channels = image.pixels.count / (image.width * image.height)
        var lime = 0
        for p in stride(from: 0, to: image.pixels.count, by: channels) where image.pixels[p] == 0xCF && image.pixels[p + 1] == 0xFF && image.pixels[p + 2] == 0x1A {
            lime += 1
        }
        XCTAssertGreaterThan(lime, 100, "lime box pixels in the screenshot")
        let artifacts = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent(".build/artifacts")
        try? FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)
        try? FileManager.default.removeItem(at: artifacts.appendingPathComponent("live-view.png"))
        try? FileManager.default.copyItem(at: screenshot, to: artifacts.appendingPathComponent("live-view.png"))
    }
}

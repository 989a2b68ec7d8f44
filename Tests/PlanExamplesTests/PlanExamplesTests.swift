import Foundation
import XCTest
import YOLOCore

/// The plan's examples run on the shared test data, and README's Swift snippets are those the
/// build compiles.
final class PlanExamplesTests: XCTestCase {
    private static let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    /// `YOLO_SHARED_DIR`, or `../shared` beside the package as on CI (the test target sees YOLOCore only).
    private func sharedFile(_ path: String) throws -> URL {
        let shared = ProcessInfo.processInfo.environment["YOLO_SHARED_DIR"].map { URL(fileURLWithPath: $0) }
            ?? Self.packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
        let url = shared.appendingPathComponent(path)
        guard FileManager.default.fileExists(atPath: url.path) else { throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: url.path]) }
        return url
    }

    func testSingleImageInference() async throws {
        let model = try await YOLO("yolo26n", task: .detect)
        let image = try Image(contentsOf: sharedFile("images/bus.jpg"))
        let (result, annotated) = try await PlanExamples.detect(image, with: model)
        let reference = try model(image)
        XCTAssertEqual(result.boxes, reference.boxes, "the plan's settings are Ultralytics' defaults")
        XCTAssertFalse(result.boxes.isEmpty)
        XCTAssertNil(result.fps, "a single image")
        XCTAssertEqual([annotated?.width, annotated?.height], [image.width, image.height])
        XCTAssertEqual(annotated, try result.annotated())
    }

    func testSessionLoopWithPauseSettingsAndStop() async throws {
        let model = try await YOLO("yolo26n", task: .detect)
        let session = try YOLOSession(model: model, source: .video(sharedFile("videos/pan.mp4")))
        let results = await PlanExamples.runSession(session, limit: 4)
        XCTAssertEqual(results.map(\.frame), [0, 1, 2, 3], "stopped after the fourth")
        XCTAssertGreaterThan(results[0].boxes.count, 1)
        XCTAssertTrue(results.dropFirst().allSatisfy { $0.boxes.count <= 1 }, "maxDetections 1 from the second frame")
        XCTAssertTrue(results.allSatisfy { ($0.fps ?? 0) > 0 })
        XCTAssertNil(session.error)
    }

    /// Every ```swift block of README but the Package.swift one appears, line by line modulo
    /// indentation and `import` lines, in a compiled file of this target.
    func testReadmeSnippetsAreCompiled() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let sources = try FileManager.default.contentsOfDirectory(atPath: Self.packageRoot.appendingPathComponent("Tests/PlanExamplesTests").path)
            .filter { $0.hasSuffix(".swift") }
            .map { try String(contentsOf: Self.packageRoot.appendingPathComponent("Tests/PlanExamplesTests/" + $0), encoding: .utf8) }
        func lines(_ text: some StringProtocol) -> [String] {
            text.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty && !$0.hasPrefix("import ") }
        }
        let compiled = sources.map(lines)
        let swiftBlocks = Self.readmeBlocks(readme).filter { !$0.hasPrefix("dependencies:") }
        XCTAssertEqual(swiftBlocks.count, 2)
        for block in swiftBlocks {
            let snippet = lines(block)
            let found = compiled.contains { file in
                file.indices.contains { start in file[start...].starts(with: snippet) }
            }
            XCTAssertTrue(found, "README snippet not in Tests/PlanExamplesTests:\n\(block)")
        }
    }

    /// README's Package.swift snippet is the arguments of a manifest `swift package` compiles.
    func testReadmePackageSnippetCompiles() throws {
        let readme = try String(contentsOf: Self.packageRoot.appendingPathComponent("README.md"), encoding: .utf8)
        let snippet = try XCTUnwrap(Self.readmeBlocks(readme).first { $0.hasPrefix("dependencies:") })
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("yolo-readme-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        try ("// swift-tools-version:6.0\nimport PackageDescription\n\nlet package = Package(name: \"MyApp\",\n" + snippet + ")\n")
            .write(to: directory.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["swift", "package", "--package-path", directory.path, "dump-package"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("\"YOLOCore\""), text)
    }

    /// The text of each ```swift block.
    private static func readmeBlocks(_ readme: String) -> [String] {
        readme.components(separatedBy: "```swift\n").dropFirst().map { $0.components(separatedBy: "```")[0] }
    }
}

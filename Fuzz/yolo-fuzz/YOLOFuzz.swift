import Foundation
import YOLOCore
import YOLONet

// A libFuzzer target, meaningful only when built with `--sanitize fuzzer` (libFuzzer then
// supplies `main`); scripts/fuzz builds and runs it. YOLO_FUZZ_TARGET picks the parser.

enum FuzzTarget: String {
    /// A whole weight file from memory: the safetensors header, the `arch` JSON, the network
    /// built from it and every tensor bound.
    case weights
    /// An Ultralytics `.pt` checkpoint from memory, on inputs with the zip signature: the zip
    /// archive, the pickle, the model read from it, the network built and every tensor bound.
    case pt
    /// `Image(data:)` on inputs with a JPEG signature.
    case jpeg
    /// `Image(data:)` on inputs with a PNG signature.
    case png
    /// The text as a data YAML (`Dataset`), as a tracker YAML and as a label file's lines.
    case data

    static let selected: FuzzTarget = {
        let name = ProcessInfo.processInfo.environment["YOLO_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            fatalError("set YOLO_FUZZ_TARGET to weights, pt, jpeg, png or data (got '\(name)')")
        }
        return target
    }()
}

/// Returns -1 (libFuzzer: keep out of the corpus) for inputs the target does not parse.
/// Any error must be a typed one with a message; anything else is a finding.
@_cdecl("LLVMFuzzerTestOneInput")
func fuzzOneInput(_ bytes: UnsafePointer<UInt8>?, _ count: Int) -> Int32 {
    let data = bytes.map { Data(bytes: $0, count: count) } ?? Data()
    do {
        switch FuzzTarget.selected {
        case .weights:
            _ = try Model(file: SafeTensorsFile(data: data))
        case .pt:
            guard data.starts(with: ZipArchive.signature) else { return -1 }
            _ = try Model(file: SafeTensorsFile(data: data))
        case .jpeg:
            guard data.starts(with: [0xFF, 0xD8, 0xFF]) else { return -1 }
            _ = try Image(data: data)
        case .png:
            guard data.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else { return -1 }
            _ = try Image(data: data)
        case .data:
            guard let text = String(data: data, encoding: .utf8) else { return -1 }
            // Each reader gets the text: one's error must not keep the others from it.
            for parse in [{ _ = try Dataset(yaml: text, url: URL(fileURLWithPath: "/nonexistent/fuzz.yaml")) },
                          { _ = try TrackerConfiguration(yaml: text) },
                          { _ = try labelRows(text, classCount: 80) }] as [() throws -> Void] {
                do {
                    try parse()
                } catch let error as LocalizedError where !(error.errorDescription ?? "").isEmpty {
                    continue
                }
            }
        }
    } catch let error as LocalizedError where !(error.errorDescription ?? "").isEmpty {
        return 0
    } catch {
        fatalError("untyped or empty error: \(error)")
    }
    return 0
}

import Foundation

/// How CSV rows give a box: corners, or centre and size.
public enum CSVBoxFormat: String, Sendable, CaseIterable {
    /// x1, y1, x2, y2.
    case xyxy
    /// Centre x, centre y, width, height.
    case xywh
}

extension Results {
    /// The columns of `csv(boxes:)`.
    public static func csvHeader(boxes: CSVBoxFormat = .xyxy) -> String {
        "image,frame,class,name,conf," + (boxes == .xyxy ? "x1,y1,x2,y2" : "x,y,w,h") + ",id,source,time"
    }

    /// One CSV line per detection, `csvHeader(boxes:)`'s columns, pixel coordinates of the original
    /// image: boxes (detect, segment, pose), the rotated boxes' enclosing boxes (obb), or the top
    /// class with empty coordinates (classify). `frame` is empty for a single image, `id` for an
    /// untracked box, `source` outside a list of sources; `time` is `Results.time`: seconds into a
    /// video file, ISO 8601 wall-clock time for a live source, empty otherwise. Text fields are
    /// quoted when they hold a comma, quote or line break (RFC 4180). No detection, no line.
    ///
    /// ```swift
    /// try (Results.csvHeader() + "\n" + result.csv()).write(toFile: "boxes.csv", atomically: true, encoding: .utf8)
    /// ```
    public func csv(boxes format: CSVBoxFormat = .xyxy) -> String {
        let image = Results.csvField(path ?? ""), frame = frame.map(String.init) ?? "", source = source.map(String.init) ?? ""
        let time: String = switch self.time {
        case let .offset(seconds): String(format: "%.3f", seconds)
        case let .wallClock(date):
            { let f = ISO8601DateFormatter(); f.formatOptions.insert(.withFractionalSeconds); return f.string(from: date) }()
        case nil: ""
        }
        func line(_ cls: Int, _ name: String, _ conf: Float, _ xyxy: [Float], _ id: Int?) -> String {
            let box = format == .xyxy || xyxy.isEmpty ? xyxy : [(xyxy[0] + xyxy[2]) / 2, (xyxy[1] + xyxy[3]) / 2, xyxy[2] - xyxy[0], xyxy[3] - xyxy[1]]
            return ([image, frame, String(cls), Results.csvField(name), "\(conf)"] + (box.isEmpty ? ["", "", "", ""] : box.map { "\($0)" })
                + [id.map(String.init) ?? "", source, time]).joined(separator: ",") + "\n"
        }
        if let probs {
            return probs.top5.isEmpty ? "" : line(probs.top1, probs.name(probs.top1), probs.top1conf, [], nil)
        }
        return (task == .obb ? obb.map { line($0.cls, $0.name, $0.conf, $0.xyxy, $0.id) }
            : self.boxes.map { line($0.cls, $0.name, $0.conf, $0.xyxy, $0.id) }).joined()
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { ",\"\n\r".contains($0) }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

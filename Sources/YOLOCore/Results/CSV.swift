import Foundation

extension Results {
    /// The columns of `csv()`.
    public static let csvHeader = "image,frame,class,name,conf,x1,y1,x2,y2,id,source"

    /// One CSV line per detection, `csvHeader`'s columns, pixel coordinates of the original
    /// image: boxes (detect, segment, pose), the rotated boxes' enclosing boxes (obb), or the top
    /// class with empty coordinates (classify). `frame` is empty for a single image, `id` for an
    /// untracked box, `source` outside a list of sources; text fields are quoted when they hold a comma, quote or line break
    /// (RFC 4180). No detection, no line.
    ///
    /// ```swift
    /// try (Results.csvHeader + "\n" + result.csv()).write(toFile: "boxes.csv", atomically: true, encoding: .utf8)
    /// ```
    public func csv() -> String {
        let image = Results.csvField(path ?? ""), frame = frame.map(String.init) ?? "", source = source.map(String.init) ?? ""
        func line(_ cls: Int, _ name: String, _ conf: Float, _ xyxy: [Float], _ id: Int?) -> String {
            ([image, frame, String(cls), Results.csvField(name), "\(conf)"] + (xyxy.isEmpty ? ["", "", "", ""] : xyxy.map { "\($0)" })
                + [id.map(String.init) ?? "", source]).joined(separator: ",") + "\n"
        }
        if let probs {
            return probs.top5.isEmpty ? "" : line(probs.top1, probs.name(probs.top1), probs.top1conf, [], nil)
        }
        return (task == .obb ? obb.map { line($0.cls, $0.name, $0.conf, $0.xyxy, $0.id) }
            : boxes.map { line($0.cls, $0.name, $0.conf, $0.xyxy, $0.id) }).joined()
    }

    static func csvField(_ text: String) -> String {
        guard text.contains(where: { ",\"\n\r".contains($0) }) else { return text }
        return "\"" + text.replacingOccurrences(of: "\"", with: "\"\"") + "\""
    }
}

import Foundation
import YOLOCore

/// What a request asks of a prediction, from its query (`/v1/predict?conf=0.5`) or form fields
/// (`/predict`), with Ultralytics' names: `model`, `conf`, `iou`, `imgsz` (a side, or `h,w`),
/// `classes` (comma-separated indices), `max_det`, `format` (`json` or `jpeg`).
struct PredictParameters: Sendable {
    var model: String?
    var configuration: YOLOConfiguration
    /// Answer with the annotated JPEG instead of JSON.
    var annotated = false

    /// Reads `values` over `base`; a value that is not a number, or out of range, is
    /// `ServerError.badParameter` naming it. Unknown names are ignored, as Ultralytics' API does.
    init(_ values: [String: String], base: YOLOConfiguration) throws {
        configuration = base
        func number<T: LosslessStringConvertible>(_ name: String, _ range: ClosedRange<T>, _ reason: String) throws -> T? {
            guard let text = values[name] else { return nil }
            guard let value = T(text.trimmingCharacters(in: .whitespaces)), range.contains(value) else {
                throw ServerError.badParameter(name: name, value: text, reason: reason)
            }
            return value
        }
        model = values["model"].flatMap { $0.isEmpty ? nil : $0 }
        if let conf = try number("conf", Float(0)...1, "must be a number in 0…1") { configuration.confidenceThreshold = conf }
        if let iou = try number("iou", Float(0)...1, "must be a number in 0…1") { configuration.iouThreshold = iou }
        if let maxDet = try number("max_det", 1...10_000, "must be an integer in 1…10000") { configuration.maxDetections = maxDet }
        if let text = values["imgsz"] {
            let sides = text.split(separator: ",", omittingEmptySubsequences: false).map { Int($0.trimmingCharacters(in: .whitespaces)) }
            guard (1...2).contains(sides.count), sides.allSatisfy({ $0.map { (32...4096).contains($0) } ?? false }) else {
                throw ServerError.badParameter(name: "imgsz", value: text, reason: "must be a side or height,width, each in 32…4096")
            }
            if sides.count == 1 { configuration.imageSize = sides[0] } else { configuration.imageShape = sides.compactMap { $0 } }
        }
        if let text = values["classes"] {
            configuration.classes = try text.split(separator: ",").map {
                guard let c = Int($0.trimmingCharacters(in: .whitespaces)), c >= 0 else {
                    throw ServerError.badParameter(name: "classes", value: text, reason: "must be class indices ≥ 0, comma-separated")
                }
                return c
            }
        }
        switch values["format"] {
        case nil, "json": break
        case "jpeg", "jpg": annotated = true
        case let other?: throw ServerError.badParameter(name: "format", value: other, reason: "must be json or jpeg")
        }
    }
}

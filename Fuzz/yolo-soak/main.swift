import Foundation
import YOLOCore

// Many predictions in one process, to show that memory stays flat: prints the resident set
// after a warm-up and at the end, and fails if it grew by 5 MB or more. scripts/soak runs it.
//   yolo-soak [PREDICTIONS] [IMGSZ] IMAGE...   (model: YOLO_SOAK_MODEL, default yolo26n)

func residentMegabytes() -> Double {
    let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
    let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
    return Double(line.split(separator: " ")[1]).map { $0 / 1024 } ?? .nan
}

let arguments = Array(CommandLine.arguments.dropFirst())
guard arguments.count >= 3, let total = Int(arguments[0]), let imageSize = Int(arguments[1]) else {
    print("usage: yolo-soak PREDICTIONS IMGSZ IMAGE...")
    exit(2)
}
let images = Array(arguments.dropFirst(2))
var configuration = YOLOConfiguration()
configuration.imageSize = imageSize
let model = try await YOLO(ProcessInfo.processInfo.environment["YOLO_SOAK_MODEL"] ?? "yolo26n",
                           configuration: configuration)

let warmUp = min(100, total / 2)
var detections = 0
var warm = Double.nan
for i in 0..<total {
    if i == warmUp {
        warm = residentMegabytes()
        print(String(format: "RSS after %d warm-up predictions: %.1f MB", warmUp, warm))
    }
    detections += try await model.predict(images[i % images.count]).boxes.count
}
let end = residentMegabytes()
print(String(format: "RSS after %d predictions: %.1f MB, growth %.1f MB (%d boxes in all)",
             total, end, end - warm, detections))
if end - warm >= 5 {
    print("RSS grew by 5 MB or more")
    exit(1)
}

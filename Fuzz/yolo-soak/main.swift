import Foundation
import YOLOCore

// Many predictions in one process, to show that memory stays flat: prints the resident set
// after a warm-up and at the end, and fails if it grew by 5 MB or more. scripts/soak runs it.
//   yolo-soak PREDICTIONS IMGSZ IMAGE...   (model: YOLO_SOAK_MODEL, default yolo26n;
//   concurrent tasks after the warm-up: YOLO_SOAK_TASKS, default 1)

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
for i in 0..<warmUp {
    detections += try await model.predict(images[i % images.count]).boxes.count
}
let warm = residentMegabytes()
print(String(format: "RSS after %d warm-up predictions: %.1f MB", warmUp, warm))
// The rest spread over concurrent tasks sharing the model, which is what a sanitizer build checks.
let tasks = max(1, Int(ProcessInfo.processInfo.environment["YOLO_SOAK_TASKS"] ?? "") ?? 1)
detections += try await withThrowingTaskGroup(of: Int.self) { group in
    for task in 0..<tasks {
        group.addTask { [model, images] in
            var boxes = 0
            for i in stride(from: warmUp + task, to: total, by: tasks) {
                boxes += try await model.predict(images[i % images.count]).boxes.count
            }
            return boxes
        }
    }
    var boxes = 0
    while let count = try await group.next() { boxes += count }
    return boxes
}
let end = residentMegabytes()
print(String(format: "RSS after %d predictions in %d task(s): %.1f MB, growth %.1f MB (%d boxes in all)",
             total, tasks, end, end - warm, detections))
if end - warm >= 5 {
    print("RSS grew by 5 MB or more")
    exit(1)
}

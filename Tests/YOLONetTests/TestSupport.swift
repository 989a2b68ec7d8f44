import Foundation
import Tensor
import XCTest

struct MissingTestData: Error, CustomStringConvertible {
    let path: String
    var description: String { "test data not found at \(path); set YOLO_SHARED_DIR / YOLO_WEIGHTS_DIR" }
}

/// `YOLO_SHARED_DIR`, or `../shared` beside the package root as on CI. Missing data fails the test.
func sharedDirectory() throws -> URL {
    let packageRoot = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    let url = ProcessInfo.processInfo.environment["YOLO_SHARED_DIR"].map { URL(fileURLWithPath: $0) }
        ?? packageRoot.deletingLastPathComponent().appendingPathComponent("shared")
    var isDirectory: ObjCBool = false
    guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue else {
        throw MissingTestData(path: url.path)
    }
    return url
}

/// A weight file by model name: `YOLO_WEIGHTS_DIR`, else the shared `weights/`.
func weightsURL(_ name: String) throws -> URL {
    let directory = try ProcessInfo.processInfo.environment["YOLO_WEIGHTS_DIR"].map { URL(fileURLWithPath: $0) }
        ?? sharedDirectory().appendingPathComponent("weights")
    let url = directory.appendingPathComponent(name + ".safetensors")
    guard FileManager.default.fileExists(atPath: url.path) else { throw MissingTestData(path: url.path) }
    return url
}

/// max |actual − expected| over all elements, or fails on a shape mismatch.
func maxAbsDifference(_ actual: Tensor, _ expected: Tensor, _ what: String,
                      file: StaticString = #filePath, line: UInt = #line) -> Float {
    guard actual.shape == expected.shape else {
        XCTFail("\(what): shape \(actual.shape), reference \(expected.shape)", file: file, line: line)
        return .infinity
    }
    var worst: Float = 0
    for (a, e) in zip(actual.scalars, expected.scalars) where !(abs(a - e) <= worst) { worst = abs(a - e) }
    return worst
}

func maxAbs(_ t: Tensor) -> Float { t.scalars.reduce(0) { max($0, abs($1)) } }

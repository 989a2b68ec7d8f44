import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// End-to-end parity with Ultralytics 8.4.190 (`../shared/reference`): from the exact input
/// tensor PyTorch received, every layer and the head output within 1e-4 · max(1, max |ref|).
/// A failure names the first diverging layer (`divergence`).
final class ParityTests: XCTestCase {
    private func reference(_ model: String, _ image: String) throws -> SafeTensorsFile {
        try SafeTensorsFile(contentsOf: sharedFile("reference/\(model)/\(image).safetensors"))
    }

    /// Runs `model` on the reference input and compares, in the order they are computed, every
    /// module output the reference holds (`layer.<i>` for `model.<i>`; a nested module
    /// `model.<i>.<path>` would be `layer.<i>.<path>`), then `output.0`, the prototypes and the
    /// raw head maps. A failure names the first comparison out of bounds and counts the later
    /// ones as downstream, which an earlier divergence may explain.
    private func check(model name: String, image: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let model = try Model(contentsOf: weightsFile(name))
        let ref = try reference(name, image)
        var results = [Comparison]()
        func compare(_ what: String, _ error: Float, _ expected: Tensor) {
            results.append(Comparison(name: what, error: error, bound: 1e-4 * max(1, maxAbs(expected))))
        }
        let output = try model.network.trace(try ref.tensor("input")) { module, y in
            let key = "layer." + module.dropFirst("model.".count)
            guard module.hasPrefix("model."), let expected = try? ref.tensor(key) else { return }
            compare(module, maxAbsDifference(y, expected, "\(name) \(key)", file: file, line: line), expected)
        }
        // Segmentation references name the detections output.0.0 and the prototypes output.0.1.
        let expected = try ref.tensor(ref.entries["output.0"] != nil ? "output.0" : "output.0.0")
        compare("output.0", model.architecture.endToEnd
            ? maxRowDifference(output.output, expected, file: file, line: line)
            : maxAbsDifference(output.output, expected, "\(name) output.0", file: file, line: line), expected)
        XCTAssertEqual(output.protos != nil, ref.entries["output.0.1"] != nil, "\(name): prototypes", file: file, line: line)
        if let protos = output.protos {
            let expected = try ref.tensor("output.0.1")
            compare("prototypes", maxAbsDifference(protos, expected, "\(name) prototypes", file: file, line: line), expected)
        }
        for (key, actual) in output.raw.sorted(by: { $0.key < $1.key }) {
            // Classification logits are output.1; the other raw maps output.1[.one2one].<key>.
            let refName = key == "logits" ? "output.1" : ref.names.first { $0.hasPrefix("output.1") && $0.hasSuffix("." + key) }
            let raw = try ref.tensor(try XCTUnwrap(refName, "\(name): no reference for raw \(key)"))
            compare("raw \(key)", maxAbsDifference(actual, raw, "\(name) raw \(key)", file: file, line: line), raw)
        }
        XCTAssertGreaterThan(results.count, 1, "\(name)/\(image): nothing compared", file: file, line: line)
        if let message = divergence(results) { XCTFail("\(name)/\(image): \(message)", file: file, line: line) }
        print("parity \(name)/\(image): " + results.map { "\($0.name) \($0.error) (bound \($0.bound))" }.joined(separator: "; "))
    }

    func testYOLO26nBusLayerByLayer() throws { try check(model: "yolo26n", image: "bus") }

    /// A failure names the first comparison out of bounds and lists the later ones out of bounds
    /// as downstream, skipping those within bounds.
    func testDivergenceNamesTheFirstFailure() {
        let results = [Comparison(name: "model.0", error: 0, bound: 1e-4), Comparison(name: "model.1", error: 0.5, bound: 1e-4),
                       Comparison(name: "model.2", error: 0, bound: 1e-4), Comparison(name: "output.0", error: .nan, bound: 1e-4)]
        XCTAssertNil(divergence(Array(results.prefix(1))))
        XCTAssertEqual(divergence(results), """
            first diverging: model.1, max |Δ| 0.5 > bound 0.0001 (the 1 compared before it agree)
              downstream: output.0, max |Δ| nan > bound 0.0001
            """)
    }

    /// Thread counts split the work differently; every layer and the head's raw maps agree
    /// within 1e-5 · max(1, max |value|).
    func testThreadCountsAgree() throws {
        let model = try Model(contentsOf: weightsFile("yolo26n"))
        let input = try reference("yolo26n", "bus").tensor("input")
        let saved = Parallel.width
        defer { Parallel.width = saved }
        func run(_ threads: Int) throws -> (layers: [Tensor], raw: [String: Tensor]) {
            Parallel.width = threads
            var layers = [Tensor]()
            let output = try model.network.forward(input) { _, y in layers.append(y) }
            return (layers, output.raw)
        }
        let one = try run(1)
        for threads in [2, 3] {
            let other = try run(threads)
            XCTAssertEqual(other.layers.count, one.layers.count)
            for (i, (a, b)) in zip(one.layers, other.layers).enumerated() {
                XCTAssertLessThanOrEqual(maxAbsDifference(b, a, "layer.\(i)"), 1e-5 * max(1, maxAbs(a)),
                                         "layer.\(i), \(threads) threads against 1")
            }
            for (key, a) in one.raw {
                let b = try XCTUnwrap(other.raw[key])
                XCTAssertLessThanOrEqual(maxAbsDifference(b, a, key), 1e-5 * max(1, maxAbs(a)), "\(key), \(threads) threads against 1")
            }
        }
    }
    func testYOLO26nZidane() throws { try check(model: "yolo26n", image: "zidane") }
    func testYOLO26nRandomUnfusedBothHeads() throws { try check(model: "yolo26n-random", image: "bus") }
    func testYOLO11nRandomDFLHead() throws { try check(model: "yolo11n-random", image: "bus") }
    func testYOLO11nTrained() throws { try check(model: "yolo11n", image: "bus") }
    func testYOLO26nSegment() throws { try check(model: "yolo26n-seg", image: "bus") }
    func testYOLO26nPose() throws { try check(model: "yolo26n-pose", image: "bus") }
    func testYOLO26nOBB() throws { try check(model: "yolo26n-obb", image: "boats") }
    func testYOLO26nClassify() throws { try check(model: "yolo26n-cls", image: "bus") }
    func testYOLO11nClassify() throws { try check(model: "yolo11n-cls", image: "bus") }
}

/// One compared tensor: the worst |Δ| and the bound it must not exceed.
struct Comparison {
    let name: String, error: Float, bound: Float
    var passed: Bool { error <= bound }
}

/// Nil when every comparison is within its bound; else the first one that is not, and the later
/// ones out of bounds as downstream (one line each).
func divergence(_ results: [Comparison]) -> String? {
    guard let first = results.firstIndex(where: { !$0.passed }) else { return nil }
    let r = results[first], later = results[(first + 1)...].filter { !$0.passed }
    var lines = ["first diverging: \(r.name), max |Δ| \(r.error) > bound \(r.bound)"
                 + " (the \(first) compared before it agree)"]
    lines += later.map { "  downstream: \($0.name), max |Δ| \($0.error) > bound \($0.bound)" }
    return lines.joined(separator: "\n")
}

/// End-to-end outputs [1, k, 6] are sorted by score; among equal scores (random weights give
/// exact ties; float rounding makes near-ties swap) PyTorch's top-k order is unspecified. So
/// the score column is compared in order, and each reference row is matched to an unused row
/// of ours with the same class and a score within 1e-4. Rows tied with the k-th score may
/// differ (which of the tied anchors made the cut). Returns the worst |Δ| over matched rows.
func maxRowDifference(_ actual: Tensor, _ expected: Tensor, file: StaticString = #filePath, line: UInt = #line) -> Float {
    guard actual.shape == expected.shape, expected.rank == 3 else {
        XCTFail("output.0: shape \(actual.shape), reference \(expected.shape)", file: file, line: line)
        return .infinity
    }
    let (k, width) = (expected.shape[1], expected.shape[2])
    func row(_ t: Tensor, _ i: Int) -> ArraySlice<Float> { t.scalars[(i * width)..<((i + 1) * width)] }
    var worst: Float = 0
    for i in 0..<k { worst = max(worst, abs(actual.scalars[i * width + 4] - expected.scalars[i * width + 4])) }
    let cutoff = expected.scalars[(k - 1) * width + 4]
    var used = Set<Int>()
    for i in 0..<k {
        let r = row(expected, i)
        let candidates = (0..<k).filter { j in
            !used.contains(j) && abs(actual.scalars[j * width + 4] - r[r.startIndex + 4]) <= 1e-4
                && actual.scalars[j * width + 5] == r[r.startIndex + 5]
        }
        let distance = { (j: Int) in zip(row(actual, j), r).map { abs($0 - $1) }.max()! }
        guard let j = candidates.min(by: { distance($0) < distance($1) }), distance(j) <= 1e-4 * max(1, maxAbs(expected)) else {
            if abs(r[r.startIndex + 4] - cutoff) <= 1e-4 { continue }  // a tie at the cut
            XCTFail("output.0 row \(i) \(Array(r)) has no match", file: file, line: line)
            return .infinity
        }
        used.insert(j)
        worst = max(worst, distance(j))
    }
    return worst
}

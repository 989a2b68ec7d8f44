import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

final class NetworkTests: XCTestCase {
    /// `trace` shows every top-level layer's output, as `forward`'s observer sees it, and the
    /// outputs of the modules inside the layers, each once, by the `state_dict` prefix of its
    /// weights (top-level Upsample and Concat layers have none). The head's Upsample and Concat
    /// pairs have no output: the C3k2 after each runs on their inputs (`UpsampledFront`).
    func testTraceNamesModulesByStateDictPath() throws {
        let url = try weightsFile("yolo26n")
        let model = try Model(contentsOf: url), file = try SafeTensorsFile(contentsOf: url)
        let x = Tensor(shape: [1, 3, 128, 96], scalars: (0..<(3 * 128 * 96)).map { Float($0 % 251) / 251 })
        var layers = [Int: Tensor]()
        let expected = try model.network.forward(x) { i, y in layers[i] = y }
        XCTAssertEqual(Set(0..<23).subtracting(layers.keys), [11, 12, 14, 15])
        var names = [String](), traced = [String: Tensor]()
        let output = try model.network.trace(x) { name, y in
            names.append(name)
            traced[name] = y
        }
        XCTAssertTrue(output.output == expected.output)
        XCTAssertEqual(names.filter { $0.split(separator: ".").count == 2 }, layers.keys.sorted().map { "model.\($0)" })
        for (i, y) in layers { XCTAssertTrue(traced["model.\(i)"] == y, "model.\(i)") }
        XCTAssertEqual(Set(names).count, names.count, "each module once")
        for name in names where name.split(separator: ".").count > 2 { XCTAssertTrue(file.names.contains { $0.hasPrefix(name + ".") }, "\(name) names no weights") }
        for name in ["model.2.cv1", "model.2.m.0", "model.2.m.0.cv1", "model.9.cv1", "model.10.cv1", "model.10.m.0",
                     "model.10.m.0.attn.qkv", "model.10.m.0.ffn.0", "model.22.m.0.0", "model.22.m.0",
                     "model.23.one2one_cv2.0.2", "model.23.one2one_cv3.2.1.1"] {
            XCTAssertTrue(names.contains(name), name)
        }
    }

    /// `isCancelled` is asked before every layer: true ends the pass with `CancellationError`
    /// there, and the next pass gives the uncancelled pass's output.
    func testCancelledPassStopsBeforeTheNextLayer() throws {
        let network = try Model(contentsOf: try weightsFile("yolo26n")).network
        let x = Tensor(shape: [1, 3, 128, 96], scalars: (0..<(3 * 128 * 96)).map { Float($0 * 7 % 251) / 251 })
        let ws = Workspace()
        let expected = Tensor(try network.forward(x, in: ws).output)
        var asked = 0, ran = 0
        XCTAssertThrowsError(try network.forward(x, in: Workspace(), observe: { _, _ in ran += 1 }, isCancelled: {
            asked += 1
            return asked > 5
        })) { XCTAssertTrue($0 is CancellationError, "\($0)") }
        XCTAssertEqual(ran, 5)
        let again = Tensor(try network.forward(x, in: ws, isCancelled: { false }).output)
        XCTAssertEqual(again.scalars, expected.scalars)
    }

    /// In an int8 graph each layer's output carries its range as the int8 convolution that wrote it
    /// measured it (or as Upsample and Concat pass it on), and that range is its floats' exact
    /// smallest and largest: the next int8 convolution quantizes by it instead of finding it.
    func testInt8OutputsCarryTheirExactRange() throws {
        let x = Tensor(shape: [1, 3, 160, 128], scalars: (0..<(3 * 160 * 128)).map { Float($0 * 7 % 251) / 251 })
        for name in ["yolo26n", "yolo11n"] {
            let network = try Model(contentsOf: try weightsFile(name), precision: .int8).network, ws = Workspace()
            var ranged = 0
            _ = try network.forward(x, in: ws) { i, y in
                guard let range = y.range else { return }
                let values = UnsafeBufferPointer(start: y.base, count: y.count)
                XCTAssertEqual(range, ValueRange(lower: values.min()!, upper: values.max()!), "\(name) model.\(i)")
                ranged += 1
            }
            // Every layer but the head (observed before it runs): none of them ends in fp32.
            XCTAssertEqual(ranged, network.nodes.count - 1, name)
        }
    }

    /// The same for the older families' modules (Sequential copies, C2f, C2, C3, C3Ghost, GhostConv,
    /// SPP, the max pools and zero padding, the transposed conv), with random weights: a range a
    /// layer claims is exact.
    func testInt8RangesOfOlderFamiliesAreExact() throws {
        let x = Tensor(shape: [1, 3, 128, 64], scalars: (0..<(3 * 128 * 64)).map { Float($0 * 7 % 251) / 251 })
        for name in ["yolov3-tinyu", "yolov5nu", "yolov6n", "yolov8n-ghost", "yolov8n-p6"] {
            var weights = RandomWeights(precision: .int8)
            let network = try Network(architecture: try XCTUnwrap(try Architecture.builtin(named: name)), weights: &weights)
            var ranged = 0
            let ws = Workspace()  // the head's maps live in it: it outlives their last read
            let head = try network.forward(x, in: ws) { i, y in
                guard let range = y.range else { return }
                let values = UnsafeBufferPointer(start: y.base, count: y.count)
                XCTAssertEqual(range, ValueRange(lower: values.min()!, upper: values.max()!), "\(name) model.\(i)")
                ranged += 1
            }
            XCTAssertGreaterThan(ranged, network.nodes.count / 2, name)
            withExtendedLifetime(ws) {
                XCTAssertTrue(UnsafeBufferPointer(start: head.output.base, count: head.output.count).allSatisfy(\.isFinite), name)
            }
        }
    }

    /// An int8 graph quantizes its input by `inputRange` when given one: the input's own range
    /// gives the outputs of the range it would measure, and a wider one other outputs.
    func testInt8InputRangeQuantizesTheInput() throws {
        let network = try Model(contentsOf: try weightsFile("yolo26n"), precision: .int8).network, ws = Workspace()
        func output(_ x: Tensor, _ range: ValueRange?) throws -> [Float] {
            HeadOutput(try network.forward(x, in: ws, inputRange: range)).output.scalars
        }
        let image = Tensor(shape: [1, 3, 96, 64], scalars: (0..<(3 * 96 * 64)).map { Float($0 * 7 % 256) / 255 })
        XCTAssertEqual(try output(image, ValueRange(lower: 0, upper: 1)), try output(image, nil))
        let dim = Tensor(shape: image.shape, scalars: image.scalars.map { 0.25 + $0 / 2 })
        XCTAssertNotEqual(try output(dim, ValueRange(lower: 0, upper: 1)), try output(dim, nil))
    }
}

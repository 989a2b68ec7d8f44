import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

final class SafeTensorsTests: XCTestCase {
    // MARK: Real files

    func testReadsYOLO26nWeights() throws {
        let file = try SafeTensorsFile(contentsOf: weightsFile("yolo26n"))
        XCTAssertEqual(file.metadata["task"], "detect")
        XCTAssertEqual(file.metadata["format"], "yolo-safetensors/1")
        XCTAssertEqual(file.entries.count, 204)
        XCTAssertEqual(file.names.first, "model.0.conv.bias")
        XCTAssertEqual(file.entries["model.0.conv.weight"], .init(dtype: .f16, shape: [16, 3, 3, 3], range: 32 ..< 896))

        let weight = try file.tensor("model.0.conv.weight")
        XCTAssertEqual(weight.shape, [16, 3, 3, 3])
        // Values read with numpy from the same file.
        XCTAssertEqual(Array(weight.scalars.prefix(4)), [-2.607421875, -0.463134765625, 3.046875, -6.76953125])

        var total = 0
        for name in file.names {
            let tensor = try file.tensor(name)
            XCTAssert(tensor.scalars.allSatisfy(\.isFinite), name)
            total += tensor.count
        }
        XCTAssertEqual(total, 2_408_932)
    }

    func testReadsReferenceActivations() throws {
        let file = try SafeTensorsFile(
            contentsOf: sharedFile("reference/yolo26n/bus.safetensors"))
        XCTAssertEqual(file.metadata, [:])
        XCTAssertEqual(file.entries["input"]?.shape, [1, 3, 640, 480])
        XCTAssertEqual(file.entries["layer.22"]?.dtype, .f32)
        let output = try file.tensor("output.0")
        XCTAssertEqual(output.shape, [1, 300, 6])
        XCTAssertEqual(Array(output.scalars.prefix(6)),
                       [132.26499938964844, 242.3797607421875, 204.73985290527344, 510.39990234375, 0.9221348166465759, 0])
    }

    // MARK: Conversion and round trip

    func testDecodesF16() throws {
        let bits: [UInt16] = [0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7C00, 0x3555]
        let file = try SafeTensorsFile(data: craft(#"{"x": {"dtype": "F16", "shape": [7], "data_offsets": [0, 14]}}"#,
                                                   data: littleEndianBytes(bits)))
        let x = try file.tensor("x")
        XCTAssertEqual(x.shape, [7])
        XCTAssertEqual(x.scalars, [1, -2, 65504, 5.9604645e-8, 0, .infinity, 0.33325195])
        XCTAssertEqual(x.scalars[4].sign, .minus)
    }

    func testDecodesBF16() throws {
        let bits: [UInt16] = [0x3F80, 0xC040, 0x7F80, 0x4049]
        let file = try SafeTensorsFile(data: craft(#"{"x": {"dtype": "BF16", "shape": [2, 2], "data_offsets": [0, 8]}}"#,
                                                   data: littleEndianBytes(bits)))
        let x = try file.tensor("x")
        XCTAssertEqual(x.shape, [2, 2])
        XCTAssertEqual(x.scalars, [1, -3, .infinity, 3.140625])
    }

    func testRoundTrip() throws {
        let tensors = [
            "b": Tensor(shape: [2, 3], scalars: [1, -2.5, .leastNonzeroMagnitude, .infinity, -0.0, 65504]),
            "a/scalar": Tensor(shape: [], scalars: [42]),
            "empty": Tensor(shape: [0, 4], scalars: []),
        ]
        let metadata = ["task": "detect", "names": #"{"0": "person / \"quoted\""}"#]
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("roundtrip-\(UUID()).safetensors")
        defer { try? FileManager.default.removeItem(at: url) }
        try SafeTensorsFile.write(tensors, metadata: metadata, to: url)

        let file = try SafeTensorsFile(contentsOf: url)
        XCTAssertEqual(file.metadata, metadata)
        XCTAssertEqual(file.names, ["a/scalar", "b", "empty"])
        XCTAssertEqual(file.entries["a/scalar"], .init(dtype: .f32, shape: [], range: 0 ..< 4))
        XCTAssertEqual(file.entries["b"], .init(dtype: .f32, shape: [2, 3], range: 4 ..< 28))
        XCTAssertEqual(file.entries["empty"], .init(dtype: .f32, shape: [0, 4], range: 28 ..< 28))
        for (name, tensor) in tensors {
            XCTAssertEqual(try file.tensor(name), tensor, name)
        }

        let bytes = try Data(contentsOf: url)
        let headerLength = bytes.prefix(8).reversed().reduce(0) { $0 << 8 | Int($1) }
        XCTAssertEqual(headerLength % 8, 0)
        XCTAssertEqual(bytes.count, 8 + headerLength + 28)
    }

    func testReadsFromDataSlice() throws {
        let bytes = Data([0xAA, 0xBB]) + craft(#"{"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}"#,
                                                 data: [0, 0, 0x80, 0x3F])
        let file = try SafeTensorsFile(data: bytes.dropFirst(2))
        XCTAssertEqual(try file.tensor("x").scalars, [1])
    }

    func testErrorDescriptionNamesTheValues() {
        let error = SafeTensorsError.byteCountMismatch(
            source: "yolo26n.safetensors", tensor: "model.0.conv.weight", dtype: .f16, shape: [16, 3, 3, 3],
            begin: 0, end: 900, expected: 864)
        XCTAssertEqual(error.localizedDescription,
                       "tensor 'model.0.conv.weight' in yolo26n.safetensors has data_offsets [0, 900] "
                           + "but shape [16, 3, 3, 3] in F16 needs 864 bytes")
    }

    // MARK: Errors

    func testUnreadableFile() {
        let path = "/nonexistent/model.safetensors"
        XCTAssertThrowsError(try SafeTensorsFile(contentsOf: URL(fileURLWithPath: path))) { error in
            guard case .unreadable(path, _)? = error as? SafeTensorsError else {
                return XCTFail("unexpected error \(error)")
            }
        }
    }

    func testDirectoryIsNamed() throws {
        let url = try weightsDirectory()
        XCTAssertThrowsError(try SafeTensorsFile(contentsOf: url)) { error in
            XCTAssertEqual(error as? SafeTensorsError, .isDirectory(source: url.path))
            XCTAssertEqual(error.localizedDescription, "\(url.path) is a directory, not a weight file")
        }
    }

    func testPyTorchCheckpointIsReadAsOne() throws {
        let file = try SafeTensorsFile(contentsOf: weightsFile("yolo26n-w8.pt"))
        XCTAssertEqual(file.metadata["format"], "yolo-safetensors/1")
        // A zip that is too short for its end record is named as a zip.
        XCTAssertThrowsError(try SafeTensorsFile(data: Data([0x50, 0x4B, 0x03, 0x04, 0, 0, 0, 0, 0]), source: src)) { error in
            XCTAssertEqual(error as? ZipError, .noEndOfCentralDirectory(source: src, fileSize: 9))
        }
    }

    func testONNXModelIsNamed() throws {
        let url = try weightsFile("yolo26n.onnx")
        XCTAssertThrowsError(try SafeTensorsFile(contentsOf: url)) { error in
            XCTAssertEqual(error as? SafeTensorsError, .foreignFormat(source: url.path, format: "an ONNX model"))
        }
    }

    func testFileTooShort() {
        assertThrows(Data([1, 0, 0]), .fileTooShort(source: src, byteCount: 3))
    }

    func testHeaderTooLarge() {
        let length = UInt64(SafeTensorsFile.maxHeaderLength + 1)
        assertThrows(craft("{}", headerLength: length), .headerTooLarge(source: src, headerLength: length))
        assertThrows(craft("{}", headerLength: .max), .headerTooLarge(source: src, headerLength: .max))
    }

    /// Headers that are valid but would take JSONSerialization hundreds of megabytes (4 KB an
    /// entry, 100 bytes a value) are refused by a count before the parse.
    func testHeaderWithTooManyEntriesOrValues() {
        let entries = (0 ... SafeTensorsFile.maxEntries).map { #""\#($0)":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}"# }
        assertThrows(craft("{" + entries.joined(separator: ",") + "}"),
                     .tooManyEntries(source: src, count: SafeTensorsFile.maxEntries + 1))
        // Brackets, colons and commas: 2 + 2 + 4 + (n - 1) + 3.
        let zeros = Array(repeating: "0", count: SafeTensorsFile.maxValues).joined(separator: ",")
        assertThrows(craft(#"{"x":{"dtype":"F32","shape":["# + zeros + #"],"data_offsets":[0,0]}}"#),
                     .tooManyValues(source: src, count: SafeTensorsFile.maxValues + 10))
        XCTAssertEqual(SafeTensorsError.tooManyEntries(source: src, count: 10_001).localizedDescription,
                       "the safetensors header of \(src) has 10001 entries, more than the limit of 10000")
        // Inside strings, escaped quotes and backslashes included, nothing counts.
        let names = #"\\\"{"# + String(repeating: ":,", count: SafeTensorsFile.maxValues) + #"}""#
        let file = try? SafeTensorsFile(data: craft(#"{"__metadata__":{"names":""# + names + "}}"), source: src)
        XCTAssertEqual(file?.metadata["names"]?.count, 2 * SafeTensorsFile.maxValues + 4)
    }

    func testHeaderPastEnd() {
        assertThrows(craft("{}", headerLength: 3), .headerPastEnd(source: src, headerLength: 3, fileSize: 10))
    }

    func testHeaderNotUTF8() {
        var bytes = craft(#"{"x": 1}"#)
        bytes[bytes.startIndex + 10] = 0xFF
        assertThrows(bytes, .headerNotUTF8(source: src))
    }

    func testHeaderNotJSON() {
        assertThrows(craft(#"{"x": "#), .headerNotJSON(source: src))
    }

    func testHeaderNotObject() {
        assertThrows(craft("[1, 2]"), .headerNotObject(source: src))
    }

    func testMetadataNotObject() {
        assertThrows(craft(#"{"__metadata__": "task"}"#), .metadataNotObject(source: src))
    }

    func testMetadataValueNotString() {
        assertThrows(craft(#"{"__metadata__": {"task": "detect", "imgsz": 640}}"#),
                     .metadataValueNotString(source: src, key: "imgsz"))
    }

    func testEntryNotObject() {
        assertThrows(craft(#"{"x": [1, 2]}"#), .entryNotObject(source: src, tensor: "x"))
    }

    func testMissingField() {
        assertThrows(craft(#"{"x": {"shape": [1], "data_offsets": [0, 4]}}"#, data: [0, 0, 0, 0]),
                     .missingField(source: src, tensor: "x", field: "dtype"))
        assertThrows(craft(#"{"x": {"dtype": "F32", "data_offsets": [0, 4]}}"#, data: [0, 0, 0, 0]),
                     .missingField(source: src, tensor: "x", field: "shape"))
        assertThrows(craft(#"{"x": {"dtype": "F32", "shape": [1]}}"#, data: [0, 0, 0, 0]),
                     .missingField(source: src, tensor: "x", field: "data_offsets"))
    }

    func testInvalidField() {
        let cases = [
            (#""dtype": 32, "shape": [1], "data_offsets": [0, 4]"#, "dtype"),
            (#""dtype": "F32", "shape": 1, "data_offsets": [0, 4]"#, "shape"),
            (#""dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]"#, "shape"),
            (#""dtype": "F32", "shape": [true], "data_offsets": [0, 4]"#, "shape"),
            (#""dtype": "F32", "shape": ["1"], "data_offsets": [0, 4]"#, "shape"),
            (#""dtype": "F32", "shape": [1e30], "data_offsets": [0, 4]"#, "shape"),
            (#""dtype": "F32", "shape": [1], "data_offsets": [0, 2, 4]"#, "data_offsets"),
            (#""dtype": "F32", "shape": [1], "data_offsets": {"begin": 0}"#, "data_offsets"),
        ]
        for (fields, field) in cases {
            assertThrows(craft(#"{"x": {\#(fields)}}"#, data: [0, 0, 0, 0]),
                         .invalidField(source: src, tensor: "x", field: field))
        }
    }

    func testUnsupportedDType() {
        assertThrows(craft(#"{"x": {"dtype": "I64", "shape": [1], "data_offsets": [0, 8]}}"#, data: Array(repeating: 0, count: 8)),
                     .unsupportedDType(source: src, tensor: "x", dtype: "I64"))
    }

    func testNegativeDimension() {
        assertThrows(craft(#"{"x": {"dtype": "F32", "shape": [2, -2], "data_offsets": [0, 16]}}"#),
                     .negativeDimension(source: src, tensor: "x", shape: [2, -2]))
    }

    func testReversedOffsets() {
        assertThrows(craft(#"{"x": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}}"#, data: [0, 0, 0, 0]),
                     .reversedOffsets(source: src, tensor: "x", begin: 4, end: 0))
    }

    func testOffsetsOutOfRange() {
        // A truncated file: the header promises 8 bytes of data, the file holds 6.
        assertThrows(craft(#"{"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}"#, data: [0, 0, 0, 0, 0, 0]),
                     .offsetsOutOfRange(source: src, tensor: "x", begin: 0, end: 8, dataSize: 6))
        assertThrows(craft(#"{"x": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}"#, data: [0, 0, 0, 0]),
                     .offsetsOutOfRange(source: src, tensor: "x", begin: -4, end: 0, dataSize: 4))
    }

    func testElementCountOverflow() {
        let shape = [4_294_967_296, 4_294_967_296]
        assertThrows(craft(#"{"x": {"dtype": "F16", "shape": \#(shape), "data_offsets": [0, 0]}}"#),
                     .elementCountOverflow(source: src, tensor: "x", shape: shape))
    }

    func testByteCountMismatch() {
        assertThrows(craft(#"{"w": {"dtype": "F16", "shape": [16, 3, 3, 3], "data_offsets": [0, 900]}}"#,
                           data: Array(repeating: 0, count: 900)),
                     .byteCountMismatch(source: src, tensor: "w", dtype: .f16, shape: [16, 3, 3, 3],
                                        begin: 0, end: 900, expected: 864))
    }

    func testOverlappingTensors() {
        let header = #"""
            {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
             "b": {"dtype": "F16", "shape": [2], "data_offsets": [6, 10]},
             "c": {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}}
            """#
        assertThrows(craft(header, data: Array(repeating: 0, count: 10)),
                     .overlappingTensors(source: src, first: "a", second: "b"))
    }

    func testUnknownTensor() throws {
        let file = try SafeTensorsFile(data: craft("{}"), source: src)
        XCTAssertThrowsError(try file.tensor("model.0.conv.weight")) { error in
            XCTAssertEqual(error as? SafeTensorsError, .unknownTensor(source: src, name: "model.0.conv.weight"))
        }
    }

    func testReservedTensorName() {
        let url = URL(fileURLWithPath: "/nonexistent/out.safetensors")
        XCTAssertThrowsError(try SafeTensorsFile.write(["__metadata__": Tensor(zeros: [1])], to: url)) { error in
            XCTAssertEqual(error as? SafeTensorsError, .reservedTensorName(source: url.path, name: "__metadata__"))
        }
    }

    // MARK: Helpers

    private let src = "crafted.safetensors"

    private func assertThrows(_ bytes: Data, _ expected: SafeTensorsError, line: UInt = #line) {
        XCTAssertThrowsError(try SafeTensorsFile(data: bytes, source: src), line: line) { error in
            XCTAssertEqual(error as? SafeTensorsError, expected, line: line)
        }
    }
}

/// A safetensors file from a header and a data blob; `headerLength` overrides the true length.
private func craft(_ header: String, data: [UInt8] = [], headerLength: UInt64? = nil) -> Data {
    let headerBytes = Array(header.utf8)
    let length = headerLength ?? UInt64(headerBytes.count)
    return Data(littleEndianBytes([length]) + headerBytes + data)
}

private func littleEndianBytes<T: FixedWidthInteger>(_ values: [T]) -> [UInt8] {
    values.flatMap { value in (0 ..< T.bitWidth / 8).map { UInt8(truncatingIfNeeded: value >> ($0 * 8)) } }
}

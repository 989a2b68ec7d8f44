import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// Ultralytics `.pt` checkpoints read in Swift: the same tensors, metadata and network outputs as
/// the matching `yolo-safetensors/1` files, and typed errors for hostile archives and pickles.
final class CheckpointTests: XCTestCase {
    private static let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Fixtures")

    /// Every tensor bit for bit, the metadata the loader reads equal as JSON, and the network's
    /// outputs on a seeded input bit-identical.
    private func assertSameModel(_ checkpoint: URL, _ safetensors: URL, file: StaticString = #filePath, line: UInt = #line) throws {
        let pt = try SafeTensorsFile(contentsOf: checkpoint)
        let st = try SafeTensorsFile(contentsOf: safetensors)
        XCTAssertEqual(pt.names, st.names, file: file, line: line)
        for name in st.names {
            XCTAssertEqual(try pt.tensor(name).shape, try st.tensor(name).shape, name, file: file, line: line)
            XCTAssertEqual(try pt.tensor(name).scalars.map(\.bitPattern), try st.tensor(name).scalars.map(\.bitPattern),
                           name, file: file, line: line)
        }
        for key in ["arch", "task", "names", "stride", "imgsz", "end2end", "kpt_shape", "bn_eps", "format"] {
            func parsed(_ text: String?) -> NSObject? {
                text.map { (try? JSONSerialization.jsonObject(with: Data($0.utf8), options: .fragmentsAllowed) as? NSObject) ?? $0 as NSString }
            }
            XCTAssertEqual(parsed(pt.metadata[key]), parsed(st.metadata[key]), key, file: file, line: line)
        }
        let a = try Model(file: pt), b = try Model(file: st)
        XCTAssertEqual(a.names, b.names, file: file, line: line)
        XCTAssertEqual(a.imageSize, b.imageSize, file: file, line: line)
        let side = a.task == .classify ? 64 : 128
        var state: UInt32 = 1
        let input = Tensor(shape: [1, 3, side, side], scalars: (0 ..< 3 * side * side).map { _ in
            state = state &* 1_664_525 &+ 1_013_904_223
            return Float(state >> 8) / Float(1 << 24)
        })
        let x = try a.network.forward(input), y = try b.network.forward(input)
        XCTAssertEqual(x.output.scalars.map(\.bitPattern), y.output.scalars.map(\.bitPattern), "output", file: file, line: line)
        XCTAssertEqual(x.protos?.scalars.map(\.bitPattern), y.protos?.scalars.map(\.bitPattern), "protos", file: file, line: line)
        XCTAssertEqual(Set(x.raw.keys), Set(y.raw.keys), file: file, line: line)
        for (key, map) in x.raw {
            XCTAssertEqual(map.scalars.map(\.bitPattern), y.raw[key]?.scalars.map(\.bitPattern), key, file: file, line: line)
        }
    }

    func testSharedCheckpointsMatchTheirSafetensors() throws {
        for name in ["yolo26n", "yolo26n-seg", "yolo26n-pose", "yolo26n-obb", "yolo26n-cls", "yolo11n"] {
            let safetensors = try weightsFile(name)
            let checkpoint = safetensors.deletingLastPathComponent().appendingPathComponent(name + "-w8.pt")
            try assertSameModel(checkpoint, safetensors)
        }
    }

    /// An unfused training checkpoint (BatchNorm, both heads, `ema` preferred over `model: None`,
    /// a non-contiguous weight) against Weights/convert.py's reading of it.
    func testUnfusedTrainingCheckpointMatchesConvertPy() throws {
        let checkpoint = Self.fixtures.appendingPathComponent("tiny26-random.pt")
        try assertSameModel(checkpoint, Self.fixtures.appendingPathComponent("tiny26-random.safetensors"))
        let file = try SafeTensorsFile(contentsOf: checkpoint)
        XCTAssertEqual(file.metadata["bn_eps"], "0.001")
        XCTAssertEqual(file.metadata["end2end"], "true")
        XCTAssertNotNil(file.entries["model.23.one2one_cv2.0.0.bn.running_var"])
        XCTAssertNotNil(file.entries["model.23.cv2.0.0.bn.running_var"])
    }

    /// Loading yolo26n-w8.pt (zip, pickle, then the same binding and folding) takes at most 1.5×
    /// as long as yolo26n.safetensors: medians of 7 interleaved loads.
    func testCheckpointLoadTime() throws {
        let safetensors = try weightsFile("yolo26n")
        let checkpoint = safetensors.deletingLastPathComponent().appendingPathComponent("yolo26n-w8.pt")
        var times: [URL: [Double]] = [:]
        for _ in 0 ..< 7 {
            for url in [safetensors, checkpoint] {
                let start = ContinuousClock.now
                _ = try Model(contentsOf: url)
                let elapsed = ContinuousClock.now - start
                times[url, default: []].append(Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1e3)
            }
        }
        let median = times.mapValues { $0.sorted()[3] }
        let (st, pt) = (median[safetensors] ?? 0, median[checkpoint] ?? 0)
        print(String(format: "load time: yolo26n.safetensors %.1f ms, yolo26n-w8.pt %.1f ms (%.2f×)", st, pt, pt / st))
        XCTAssertLessThanOrEqual(pt, 1.5 * st)
    }

    // MARK: Hostile zips

    private func checkpointError(_ data: Data) -> Error? {
        do {
            _ = try SafeTensorsFile(data: data, source: "x.pt")
            return nil
        } catch {
            XCTAssertFalse((error as? LocalizedError)?.errorDescription?.isEmpty ?? true, "\(error)")
            return error
        }
    }

    func testTruncatedArchivesAreTypedErrors() throws {
        let data = try Data(contentsOf: Self.fixtures.appendingPathComponent("tiny26-random.pt"))
        for length in [4, 30, 1000, data.count / 2, data.count - 23, data.count - 1] {
            XCTAssertNotNil(checkpointError(data.prefix(length)), "\(length) bytes")
        }
        XCTAssertEqual(checkpointError(data.prefix(1000)) as? ZipError, .noEndOfCentralDirectory(source: "x.pt", fileSize: 1000))
    }

    func testCompressedEntryIsRefused() {
        let zip = Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.emptyDict))], method: 8)
        XCTAssertEqual(checkpointError(zip.data) as? ZipError, .compressed(source: "x.pt", entry: "archive/data.pkl", method: 8))
    }

    func testOffsetsOutsideTheFileAreRefused() {
        var zip = Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.emptyDict))])
        zip.localOffsets[0] = 0xFFFF_FF00
        XCTAssertEqual(checkpointError(zip.data) as? ZipError,
                       .truncated(source: "x.pt", what: "local header of 'archive/data.pkl'", offset: 0xFFFF_FF00, length: 0,
                                  fileSize: zip.data.count))
        zip = Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.emptyDict))])
        zip.entryCount = 60_000
        guard case .truncated(_, let what, _, _, _)? = checkpointError(zip.data) as? ZipError else {
            return XCTFail("an absurd entry count must be refused")
        }
        XCTAssertEqual(what, "central directory of 60000 entries")
        zip = Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.emptyDict))])
        zip.sizes[0] = 0x7FFF_FFFF
        XCTAssertNotNil(checkpointError(zip.data) as? ZipError)
    }

    func testStorageBeyondItsEntryIsRefused() {
        // A tensor of 100 floats whose storage entry holds 8 bytes.
        let pickle = Pickler.checkpoint(yaml: Pickler.emptyDict, parameters: Pickler.tensor(storageCount: 100, size: [100]))
        let zip = Zip([("archive/data.pkl", pickle), ("archive/data/0", [UInt8](repeating: 0, count: 8))])
        XCTAssertEqual(checkpointError(zip.data) as? CheckpointError,
                       .storageTooSmall(source: "x.pt", tensor: "w", entry: "archive/data/0", needed: 400, size: 8))
        let missing = Zip([("archive/data.pkl", pickle)])
        XCTAssertEqual(checkpointError(missing.data) as? CheckpointError,
                       .missingStorage(source: "x.pt", tensor: "w", entry: "archive/data/0"))
    }

    /// Sizes and offsets in ZIP64 extra fields, as torch writes them past 4 GiB; F32 storage values.
    func testZIP64EntriesAndFloatStorage() throws {
        let values: [Float] = (0 ..< 100).map { Float($0) * 0.25 - 3 }
        let pickle = Pickler.checkpoint(yaml: Pickler.emptyDict, parameters: Pickler.tensor(storageCount: 100, size: [4, 25]))
        var zip = Zip([("archive/data.pkl", pickle), ("archive/data/0", values.flatMap { Pickler.le($0.bitPattern) })])
        zip.zip64 = true
        let file = try SafeTensorsFile(data: zip.data, source: "x.pt")
        XCTAssertEqual(file.entries["w"]?.dtype, .f32)
        XCTAssertEqual(try file.tensor("w").shape, [4, 25])
        XCTAssertEqual(try file.tensor("w").scalars, values)
    }

    // MARK: Hostile pickles

    private func pickleError(_ bytes: [UInt8]) -> PickleError? {
        do {
            _ = try Pickle(data: Data(bytes))
            return nil
        } catch {
            XCTAssertFalse(error.localizedDescription.isEmpty)
            return error as? PickleError
        }
    }

    func testMalformedPicklesAreTypedErrors() {
        XCTAssertEqual(pickleError([0x80, 2, 0xFF]), .unsupportedOpcode(opcode: 0xFF, offset: 2))
        XCTAssertEqual(pickleError([0x80, 2, 0x58, 0xFF, 0xFF, 0xFF, 0x7F, 0x61]), .truncated(opcode: "BINUNICODE", offset: 2))
        XCTAssertEqual(pickleError([0x80, 2, 0x2E]), .stackUnderflow(opcode: "STOP", offset: 2))
        XCTAssertEqual(pickleError([0x80, 2, 0x74]), .noMark(opcode: "TUPLE", offset: 2))
        // Values before a MARK cannot be popped inside it, nor taken by TUPLE2.
        XCTAssertEqual(pickleError([0x80, 2, 0x4E, 0x28, 0x30]), .stackUnderflow(opcode: "POP", offset: 4))
        XCTAssertEqual(pickleError([0x80, 2, 0x4E, 0x28, 0x4E, 0x86]), .stackUnderflow(opcode: "TUPLE2", offset: 5))
        XCTAssertEqual(pickleError([0x80, 2, 0x4E, 0x28, 0x4E, 0x28, 0x31, 0x30, 0x30]), .stackUnderflow(opcode: "POP", offset: 8))
        XCTAssertEqual(pickleError([0x80, 2, 0x4E]), .noStop(length: 3))
        // A huge memo index costs one dictionary slot; reading an unwritten one is an error.
        XCTAssertNil(pickleError([0x80, 2, 0x4E, 0x72, 0xFF, 0xFF, 0xFF, 0xFF, 0x2E]))
        XCTAssertEqual(pickleError([0x80, 2, 0x6A, 0xFF, 0xFF, 0xFF, 0xFF]), .missingMemo(index: 0xFFFF_FFFF, offset: 2))
    }

    func testCallsAreRecordedNotMade() throws {
        // os.system('rm -rf /') becomes an inert instance record.
        let pickle = try Pickle(data: Data(Pickler.proto + Pickler.global("os", "system") + Pickler.string("rm -rf /")
                                           + [0x85, 0x52, 0x2E]))
        guard case .instance(let callable)? = pickle[pickle.root]?.kind else { return XCTFail("not a record") }
        XCTAssertEqual(pickle[callable]?.kind, .global(module: "os", name: "system"))
        XCTAssertEqual(pickle[pickle.root]?.items, [.string("rm -rf /")])
    }

    func testAllowListedCallsCheckTheirArguments() {
        // _rebuild_tensor_v2 given a record instead of a storage.
        let record = Pickler.global("os", "system") + [0x29, 0x52]
        let call = Pickler.proto + Pickler.global("torch._utils", "_rebuild_tensor_v2") + [0x28] + record
            + [0x4B, 0, 0x29, 0x29, 0x74, 0x52, 0x2E]
        guard case .invalidCall(let function, _, _)? = pickleError(call) else { return XCTFail("accepted a record as storage") }
        XCTAssertEqual(function, "torch._utils._rebuild_tensor_v2")
        // A persistent id naming a class other than a torch storage.
        let id = Pickler.proto + [0x28] + Pickler.string("storage") + Pickler.global("os", "system") + Pickler.string("0")
            + Pickler.string("cpu") + [0x4B, 1, 0x74, 0x51, 0x2E]
        guard case .notAStorage? = pickleError(id) else { return XCTFail("accepted os.system as a storage") }
        // A view reaching past its storage, and an absurd element count.
        XCTAssertNotNil(pickleError(Pickler.proto + Pickler.tensor(storageCount: 4, size: [5]) + [0x2E]))
        XCTAssertNotNil(pickleError(Pickler.proto + Pickler.tensor(storageCount: 1 << 62, size: [1]) + [0x2E]))
        XCTAssertNotNil(pickleError(Pickler.proto + Pickler.tensor(storageCount: 4, size: [0], offset: 1 << 62) + [0x2E]))
    }

    func testDeepAndCyclicStructuresAreTypedErrors() {
        // 10,000 nested lists as the architecture dict.
        let deep = [UInt8](repeating: 0x5D, count: 10_000) + [UInt8](repeating: 0x61, count: 9_999)
        let zip = Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.backbone(deep)))])
        XCTAssertEqual(checkpointError(zip.data) as? CheckpointError,
                       .tooDeep(source: "x.pt", what: "architecture dict", limit: 64))
        // A list that holds itself.
        let cycle: [UInt8] = [0x5D, 0x71, 200, 0x68, 200, 0x61]
        XCTAssertEqual(checkpointError(Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.backbone(cycle)))]).data) as? CheckpointError,
                       .tooDeep(source: "x.pt", what: "architecture dict", limit: 64))
        // 40 levels of lists holding the level below twice: 2⁴⁰ visits if walked naively.
        var shared: [UInt8] = [0x5D, 0x71, 201, 0x30]
        for _ in 0 ..< 40 { shared += [0x5D, 0x68, 201, 0x61, 0x68, 201, 0x61, 0x71, 201, 0x30] }
        shared += [0x68, 201]
        XCTAssertEqual(checkpointError(Zip([("archive/data.pkl", Pickler.checkpoint(yaml: Pickler.backbone(shared)))]).data)
                           as? CheckpointError,
                       .tooLarge(source: "x.pt", limit: 2_000_000))
    }
}

/// Pickle bytes for the tests: protocol 2 opcodes, and a minimal Ultralytics-like checkpoint.
private enum Pickler {
    static let proto: [UInt8] = [0x80, 2]
    static let emptyDict: [UInt8] = [0x7D]

    static func string(_ s: String) -> [UInt8] { [0x58] + le(UInt32(s.utf8.count)) + Array(s.utf8) }
    static func global(_ module: String, _ name: String) -> [UInt8] { [0x63] + Array("\(module)\n\(name)\n".utf8) }

    /// `_rebuild_tensor_v2(storage('0', FloatStorage, count), 0, size, contiguous stride)`.
    static func tensor(storageCount: Int, size: [Int], offset: Int = 0) -> [UInt8] {
        var strides = [Int](repeating: 1, count: size.count)
        for i in stride(from: size.count - 2, through: 0, by: -1) { strides[i] = strides[i + 1] * size[i + 1] }
        func tuple(_ values: [Int]) -> [UInt8] { [0x28] + values.flatMap(long) + [0x74] }
        return global("torch._utils", "_rebuild_tensor_v2") + [0x28]
            + [0x28] + string("storage") + global("torch", "FloatStorage") + string("0") + string("cpu") + long(storageCount)
            + [0x74, 0x51] + long(offset) + tuple(size) + tuple(strides) + [0x89, 0x7D, 0x74, 0x52]
    }

    /// `{'backbone': <value>}`
    static func backbone(_ value: [UInt8]) -> [UInt8] { [0x7D] + string("backbone") + value + [0x73] }

    static func long(_ value: Int) -> [UInt8] { [0x8A, 8] + le(UInt64(value)) }
    static func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] { withUnsafeBytes(of: value.littleEndian, Array.init) }

    /// `{'ema': DetectionModel(yaml=<yaml>, _parameters={'w': <parameters>}, _buffers={}, _modules={})}`
    static func checkpoint(yaml: [UInt8], parameters: [UInt8]? = nil) -> [UInt8] {
        let params = [0x7D] + (parameters.map { string("w") + $0 + [0x73] } ?? [])
        return proto + [0x7D] + string("ema") + global("ultralytics.nn.tasks", "DetectionModel") + [0x29, 0x81]
            + [0x7D] + string("yaml") + yaml + [0x73] + string("_parameters") + params + [0x73]
            + string("_buffers") + [0x7D, 0x73] + string("_modules") + [0x7D, 0x73]
            + [0x62, 0x73, 0x2E]
    }
}

/// A stored zip like PyTorch's: local headers, the central directory and its end record.
private struct Zip {
    let files: [(name: String, bytes: [UInt8])]
    let method: UInt16
    var localOffsets: [UInt32]
    var sizes: [UInt32]
    var entryCount: UInt16
    /// Central directory sizes and offsets saturated, their values in ZIP64 extra fields.
    var zip64 = false

    init(_ files: [(String, [UInt8])], method: UInt16 = 0) {
        self.files = files.map { (name: $0.0, bytes: $0.1) }
        self.method = method
        var offset = 0
        localOffsets = files.map { file in
            defer { offset += 30 + file.0.utf8.count + file.1.count }
            return UInt32(offset)
        }
        sizes = files.map { UInt32($0.1.count) }
        entryCount = UInt16(files.count)
    }

    var data: Data {
        var out = [UInt8]()
        func le<T: FixedWidthInteger>(_ value: T) { out += Pickler.le(value) }
        for file in files {
            le(UInt32(0x0403_4B50)); le(UInt16(20)); le(UInt16(0)); le(method); le(UInt32(0)); le(UInt32(0))
            le(UInt32(file.bytes.count)); le(UInt32(file.bytes.count)); le(UInt16(file.name.utf8.count)); le(UInt16(0))
            out += Array(file.name.utf8) + file.bytes
        }
        let directory = out.count
        for (i, file) in files.enumerated() {
            let saturated: UInt32 = 0xFFFF_FFFF
            le(UInt32(0x0201_4B50)); le(UInt16(20)); le(UInt16(20)); le(UInt16(0)); le(method); le(UInt32(0))
            le(UInt32(0)); le(zip64 ? saturated : sizes[i]); le(zip64 ? saturated : sizes[i])
            le(UInt16(file.name.utf8.count)); le(UInt16(zip64 ? 28 : 0)); le(UInt16(0))
            le(UInt16(0)); le(UInt16(0)); le(UInt32(0)); le(zip64 ? saturated : localOffsets[i])
            out += Array(file.name.utf8)
            if zip64 {
                le(UInt16(1)); le(UInt16(24)); le(UInt64(sizes[i])); le(UInt64(sizes[i])); le(UInt64(localOffsets[i]))
            }
        }
        let size = out.count - directory
        le(UInt32(0x0605_4B50)); le(UInt16(0)); le(UInt16(0)); le(entryCount); le(entryCount)
        le(UInt32(size)); le(UInt32(directory)); le(UInt16(0))
        return Data(out)
    }
}

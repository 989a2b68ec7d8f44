import Foundation
import Tensor

package enum SafeTensorsError: Error, LocalizedError, Equatable {
    case unreadable(source: String, reason: String)
    case isDirectory(source: String)
    case foreignFormat(source: String, format: String)
    case fileTooShort(source: String, byteCount: Int)
    case headerTooLarge(source: String, headerLength: UInt64)
    case tooManyEntries(source: String, count: Int)
    case tooManyValues(source: String, count: Int)
    case headerPastEnd(source: String, headerLength: UInt64, fileSize: Int)
    case headerNotUTF8(source: String)
    case headerNotJSON(source: String)
    case headerNotObject(source: String)
    case metadataNotObject(source: String)
    case metadataValueNotString(source: String, key: String)
    case entryNotObject(source: String, tensor: String)
    case missingField(source: String, tensor: String, field: String)
    case invalidField(source: String, tensor: String, field: String)
    case unsupportedDType(source: String, tensor: String, dtype: String)
    case negativeDimension(source: String, tensor: String, shape: [Int])
    case reversedOffsets(source: String, tensor: String, begin: Int, end: Int)
    case offsetsOutOfRange(source: String, tensor: String, begin: Int, end: Int, dataSize: Int)
    case elementCountOverflow(source: String, tensor: String, shape: [Int])
    case byteCountMismatch(
        source: String, tensor: String, dtype: SafeTensorsFile.DType, shape: [Int], begin: Int, end: Int,
        expected: Int)
    case overlappingTensors(source: String, first: String, second: String)
    case unknownTensor(source: String, name: String)
    case reservedTensorName(source: String, name: String)

    package var errorDescription: String? {
        switch self {
        case let .unreadable(source, reason):
            "cannot read safetensors file \(source): \(reason)"
        case let .isDirectory(source):
            "\(source) is a directory, not a weight file"
        case let .foreignFormat(source, format):
            "\(source) is \(format), not a safetensors file or an Ultralytics .pt checkpoint"
        case let .fileTooShort(source, byteCount):
            "\(source) is \(byteCount) bytes long, too short for the 8-byte safetensors header length"
        case let .headerTooLarge(source, headerLength):
            "\(source) declares a \(headerLength)-byte safetensors header, more than the "
                + "\(SafeTensorsFile.maxHeaderLength)-byte limit"
        case let .tooManyEntries(source, count):
            "the safetensors header of \(source) has \(count) entries, more than the limit of \(SafeTensorsFile.maxEntries)"
        case let .tooManyValues(source, count):
            "the safetensors header of \(source) has about \(count) JSON values, more than the limit of "
                + "\(SafeTensorsFile.maxValues)"
        case let .headerPastEnd(source, headerLength, fileSize):
            "\(source) declares a \(headerLength)-byte safetensors header but the file is only \(fileSize) bytes"
        case let .headerNotUTF8(source):
            "the safetensors header of \(source) is not valid UTF-8"
        case let .headerNotJSON(source):
            "the safetensors header of \(source) is not valid JSON"
        case let .headerNotObject(source):
            "the safetensors header of \(source) is not a JSON object"
        case let .metadataNotObject(source):
            "'__metadata__' in \(source) is not an object of strings"
        case let .metadataValueNotString(source, key):
            "metadata '\(key)' in \(source) is not a string"
        case let .entryNotObject(source, tensor):
            "tensor '\(tensor)' in \(source) is not a JSON object"
        case let .missingField(source, tensor, field):
            "tensor '\(tensor)' in \(source) has no '\(field)'"
        case let .invalidField(source, tensor, field):
            "tensor '\(tensor)' in \(source) has a '\(field)' that is not \(Self.expectedType(of: field))"
        case let .unsupportedDType(source, tensor, dtype):
            "tensor '\(tensor)' in \(source) has dtype \(dtype); supported are F16, BF16 and F32"
        case let .negativeDimension(source, tensor, shape):
            "tensor '\(tensor)' in \(source) has a negative dimension in shape \(shape)"
        case let .reversedOffsets(source, tensor, begin, end):
            "tensor '\(tensor)' in \(source) has data_offsets [\(begin), \(end)] that end before they begin"
        case let .offsetsOutOfRange(source, tensor, begin, end, dataSize):
            "tensor '\(tensor)' in \(source) has data_offsets [\(begin), \(end)] outside the \(dataSize)-byte "
                + "data section (truncated file?)"
        case let .elementCountOverflow(source, tensor, shape):
            "tensor '\(tensor)' in \(source) has shape \(shape) whose byte size overflows"
        case let .byteCountMismatch(source, tensor, dtype, shape, begin, end, expected):
            "tensor '\(tensor)' in \(source) has data_offsets [\(begin), \(end)] but shape \(shape) "
                + "in \(dtype.rawValue) needs \(expected) bytes"
        case let .overlappingTensors(source, first, second):
            "tensors '\(first)' and '\(second)' in \(source) have overlapping data"
        case let .unknownTensor(source, name):
            "\(source) has no tensor '\(name)'"
        case let .reservedTensorName(source, name):
            "cannot write a tensor named '\(name)' to \(source): the name is reserved for metadata"
        }
    }

    private static func expectedType(of field: String) -> String {
        switch field {
        case "shape": "an array of integers"
        case "data_offsets": "an array of two integers"
        default: "a string"
        }
    }
}

/// A safetensors file: an 8-byte little-endian header length, a JSON header, then raw little-endian data.
/// Tensors are decoded to Float32 on demand, so a memory-mapped file is only paged in as it is used.
package struct SafeTensorsFile: Sendable {
    package enum DType: String, Sendable {
        case f16 = "F16", bf16 = "BF16", f32 = "F32"

        var byteSize: Int { self == .f32 ? 4 : 2 }
    }

    package struct Entry: Sendable, Equatable {
        package let dtype: DType
        package let shape: [Int]
        /// Byte range inside the data section.
        package let range: Range<Int>

        package init(dtype: DType, shape: [Int], range: Range<Int>) {
            self.dtype = dtype
            self.shape = shape
            self.range = range
        }
    }

    /// Limits on the header, checked before it is parsed: JSONSerialization takes about 4 KB per
    /// entry and 100 bytes per value (1.5 million tiny entries, 95 MB, took 6.4 GB). The largest
    /// real header, yolo26n's with its BatchNorms unfused, is 60 KB with 595 entries and ~7,000 values.
    package static let maxHeaderLength = 16 << 20
    package static let maxEntries = 10_000
    package static let maxValues = 200_000

    package let metadata: [String: String]
    package let entries: [String: Entry]
    package var names: [String] { entries.keys.sorted() }

    private let storage: Data
    private let dataStart: Int
    private let source: String

    package init(contentsOf url: URL) throws {
        let data: Data
        do {
            data = try Data(contentsOf: url, options: .alwaysMapped)
        } catch {
            var isDirectory: ObjCBool = false
            if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), isDirectory.boolValue {
                throw SafeTensorsError.isDirectory(source: url.path)
            }
            throw SafeTensorsError.unreadable(source: url.path, reason: error.localizedDescription)
        }
        try self.init(data: data, source: url.path)
    }

    /// A safetensors file, or an Ultralytics `.pt` checkpoint (told apart by the zip signature)
    /// read as the `yolo-safetensors/1` file it converts to.
    package init(data: Data, source: String = "<memory>") throws {
        if data.starts(with: ZipArchive.signature) {
            self = try Checkpoint.weights(data: data, source: source)
            return
        }
        guard data.count >= 8 else { throw SafeTensorsError.fileTooShort(source: source, byteCount: data.count) }
        let headerLength = data.withUnsafeBytes { UInt64(littleEndian: $0.loadUnaligned(as: UInt64.self)) }
        guard headerLength <= Self.maxHeaderLength else {
            throw Self.foreignFormat(data, source: source)
                ?? .headerTooLarge(source: source, headerLength: headerLength)
        }
        guard Int(headerLength) <= data.count - 8 else {
            throw Self.foreignFormat(data, source: source)
                ?? .headerPastEnd(source: source, headerLength: headerLength, fileSize: data.count)
        }
        let dataStart = 8 + Int(headerLength)
        let headerBytes = data[data.startIndex + 8 ..< data.startIndex + dataStart]
        guard String(validating: headerBytes, as: UTF8.self) != nil else {
            throw SafeTensorsError.headerNotUTF8(source: source)
        }
        let (entryCount, valueCount) = headerBytes.withUnsafeBytes(Self.census)
        guard entryCount <= Self.maxEntries else { throw SafeTensorsError.tooManyEntries(source: source, count: entryCount) }
        guard valueCount <= Self.maxValues else { throw SafeTensorsError.tooManyValues(source: source, count: valueCount) }
        let json: Any
        do {
            json = try JSONSerialization.jsonObject(with: headerBytes, options: .fragmentsAllowed)
        } catch {
            throw SafeTensorsError.headerNotJSON(source: source)
        }
        guard var header = json as? [String: Any] else { throw SafeTensorsError.headerNotObject(source: source) }

        var metadata: [String: String] = [:]
        if let rawMetadata = header.removeValue(forKey: "__metadata__") {
            guard let object = rawMetadata as? [String: Any] else {
                throw SafeTensorsError.metadataNotObject(source: source)
            }
            for (key, value) in object {
                guard let string = value as? String else {
                    throw SafeTensorsError.metadataValueNotString(source: source, key: key)
                }
                metadata[key] = string
            }
        }

        let dataSize = data.count - dataStart
        var entries: [String: Entry] = [:]
        // Sorted so that a file with several faults always reports the same one.
        for name in header.keys.sorted() {
            entries[name] = try Self.parseEntry(name, header[name] as Any, dataSize: dataSize, source: source)
        }
        try Self.checkNoOverlap(entries, source: source)

        self.metadata = metadata
        self.entries = entries
        self.storage = data
        self.dataStart = dataStart
        self.source = source
    }

    /// Tensors already located in `data` (ranges from its start), e.g. a checkpoint's; every range
    /// is checked to lie in `data` and to match its entry's shape.
    init(metadata: [String: String], entries: [String: Entry], data: Data, source: String) throws {
        for (name, entry) in entries {
            let begin = entry.range.lowerBound, end = entry.range.upperBound
            guard begin >= 0, end <= data.count else {
                throw SafeTensorsError.offsetsOutOfRange(source: source, tensor: name, begin: begin, end: end, dataSize: data.count)
            }
            let (count, overflow) = entry.shape.reduce((entry.dtype.byteSize, false)) {
                let product = $0.0.multipliedReportingOverflow(by: $1)
                return (product.partialValue, $0.1 || product.overflow || $1 < 0)
            }
            guard !overflow, count == entry.range.count else {
                throw SafeTensorsError.byteCountMismatch(source: source, tensor: name, dtype: entry.dtype, shape: entry.shape,
                                                         begin: begin, end: end, expected: count)
            }
        }
        self.metadata = metadata
        self.entries = entries
        self.storage = data
        self.dataStart = 0
        self.source = source
    }

    /// Files commonly given in place of a weight file, named by their first bytes. Consulted only
    /// once the header length is impossible, since any 8 bytes are a valid length.
    private static func foreignFormat(_ data: Data, source: String) -> SafeTensorsError? {
        let head = [UInt8](data.prefix(3))
        // An ONNX ModelProto opens with field 1 (ir_version, a one-byte varint), then a
        // length-delimited field (producer_name, graph, …).
        if head.count == 3, head[0] == 0x08, head[1] < 0x80, head[2] & 0x07 == 2 {
            return .foreignFormat(source: source, format: "an ONNX model")
        }
        return nil
    }

    /// The top-level members of a JSON object (its colons at depth 1) and an upper bound on its
    /// values (colons, commas and opening brackets), outside strings; for malformed JSON, whatever
    /// it comes to, as the parse then fails anyway.
    private static func census(_ json: UnsafeRawBufferPointer) -> (entries: Int, values: Int) {
        var entries = 0, values = 0, depth = 0, inString = false, escaped = false
        for byte in json {
            if escaped {
                escaped = false
                continue
            }
            if inString {
                escaped = byte == UInt8(ascii: "\\")
                inString = byte != UInt8(ascii: "\"")
                continue
            }
            switch byte {
            case UInt8(ascii: "\""): inString = true
            case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1; values += 1
            case UInt8(ascii: "}"), UInt8(ascii: "]"): depth -= 1
            case UInt8(ascii: ","): values += 1
            case UInt8(ascii: ":"): values += 1; if depth == 1 { entries += 1 }
            default: break
            }
        }
        return (entries, values)
    }

    private static func parseEntry(_ name: String, _ value: Any, dataSize: Int, source: String) throws -> Entry {
        guard let object = value as? [String: Any] else {
            throw SafeTensorsError.entryNotObject(source: source, tensor: name)
        }
        func field(_ key: String) throws -> Any {
            guard let value = object[key] else {
                throw SafeTensorsError.missingField(source: source, tensor: name, field: key)
            }
            return value
        }
        func integers(_ key: String) throws -> [Int] {
            guard let array = try field(key) as? [Any] else {
                throw SafeTensorsError.invalidField(source: source, tensor: name, field: key)
            }
            return try array.map {
                guard let int = jsonInteger($0) else {
                    throw SafeTensorsError.invalidField(source: source, tensor: name, field: key)
                }
                return int
            }
        }

        guard let dtypeName = try field("dtype") as? String else {
            throw SafeTensorsError.invalidField(source: source, tensor: name, field: "dtype")
        }
        guard let dtype = DType(rawValue: dtypeName) else {
            throw SafeTensorsError.unsupportedDType(source: source, tensor: name, dtype: dtypeName)
        }
        let shape = try integers("shape")
        guard shape.allSatisfy({ $0 >= 0 }) else {
            throw SafeTensorsError.negativeDimension(source: source, tensor: name, shape: shape)
        }
        let offsets = try integers("data_offsets")
        guard offsets.count == 2 else {
            throw SafeTensorsError.invalidField(source: source, tensor: name, field: "data_offsets")
        }
        let (begin, end) = (offsets[0], offsets[1])
        guard begin <= end else {
            throw SafeTensorsError.reversedOffsets(source: source, tensor: name, begin: begin, end: end)
        }
        guard begin >= 0, end <= dataSize else {
            throw SafeTensorsError.offsetsOutOfRange(
                source: source, tensor: name, begin: begin, end: end, dataSize: dataSize)
        }
        var byteCount = dtype.byteSize
        for dim in shape {
            let (product, overflow) = byteCount.multipliedReportingOverflow(by: dim)
            guard !overflow else {
                throw SafeTensorsError.elementCountOverflow(source: source, tensor: name, shape: shape)
            }
            byteCount = product
        }
        guard byteCount == end - begin else {
            throw SafeTensorsError.byteCountMismatch(
                source: source, tensor: name, dtype: dtype, shape: shape, begin: begin, end: end,
                expected: byteCount)
        }
        return Entry(dtype: dtype, shape: shape, range: begin ..< end)
    }

    private static func checkNoOverlap(_ entries: [String: Entry], source: String) throws {
        let byStart = entries.filter { !$0.value.range.isEmpty }
            .sorted { ($0.value.range.lowerBound, $0.key) < ($1.value.range.lowerBound, $1.key) }
        for (previous, next) in zip(byStart, byStart.dropFirst())
        where next.value.range.lowerBound < previous.value.range.upperBound {
            throw SafeTensorsError.overlappingTensors(source: source, first: previous.key, second: next.key)
        }
    }

    /// The tensor converted to Float32, with the entry's shape.
    package func tensor(_ name: String) throws -> Tensor {
        guard let entry = entries[name] else { throw SafeTensorsError.unknownTensor(source: source, name: name) }
        let count = entry.range.count / entry.dtype.byteSize
        let scalars = [Float](unsafeUninitializedCapacity: count) { out, initialized in
            storage.withUnsafeBytes { file in
                guard let bytes = file.baseAddress?.advanced(by: dataStart + entry.range.lowerBound),
                      let destination = out.baseAddress else { return }
                switch entry.dtype {
                case .f16:
                    Self.decode(bytes, into: destination, count: count) { (bits: UInt16) in
                        Float(Float16(bitPattern: bits))
                    }
                case .bf16:
                    Self.decode(bytes, into: destination, count: count) { (bits: UInt16) in
                        Float(bitPattern: UInt32(bits) << 16)
                    }
                case .f32:
                    Self.decode(bytes, into: destination, count: count) { (bits: UInt32) in Float(bitPattern: bits) }
                }
            }
            initialized = count
        }
        return Tensor(shape: entry.shape, scalars: scalars)
    }

    /// Raw pointers and an unchecked index keep the loop free of traps so that LLVM vectorizes it
    /// (with F16C, 8 or 16 halves per vcvtph2ps).
    @inline(__always)
    private static func decode<Bits: FixedWidthInteger>(
        _ bytes: UnsafeRawPointer, into destination: UnsafeMutablePointer<Float>, count: Int,
        _ convert: (Bits) -> Float
    ) {
        for i in 0 ..< count {
            let bits = bytes.loadUnaligned(fromByteOffset: i &* MemoryLayout<Bits>.size, as: Bits.self)
            destination[i] = convert(Bits(littleEndian: bits))
        }
    }

    /// Writes tensors as F32 (or F16, rounded to nearest even like torch's `half()`) laid out like the
    /// reference implementation: names sorted, data contiguous, and the JSON header padded with
    /// spaces to a multiple of 8 bytes so that the data section stays aligned.
    package static func write(_ tensors: [String: Tensor], metadata: [String: String] = [:], half: Bool = false,
                              to url: URL) throws {
        if tensors["__metadata__"] != nil {
            throw SafeTensorsError.reservedTensorName(source: url.path, name: "__metadata__")
        }
        let sorted = tensors.sorted { $0.key < $1.key }
        var header: [String: Any] = [:]
        if !metadata.isEmpty { header["__metadata__"] = metadata }
        let dtype: DType = half ? .f16 : .f32
        var dataSize = 0
        for (name, tensor) in sorted {
            header[name] = ["dtype": dtype.rawValue, "shape": tensor.shape,
                            "data_offsets": [dataSize, dataSize + dtype.byteSize * tensor.count]] as [String: Any]
            dataSize += dtype.byteSize * tensor.count
        }
        var headerBytes = try JSONSerialization.data(
            withJSONObject: header, options: [.sortedKeys, .withoutEscapingSlashes])
        headerBytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: (8 - headerBytes.count % 8) % 8))

        let dataStart = 8 + headerBytes.count
        var file = Data(count: dataStart + dataSize)
        file.withUnsafeMutableBytes { out in
            out.storeBytes(of: UInt64(headerBytes.count).littleEndian, as: UInt64.self)
            UnsafeMutableRawBufferPointer(rebasing: out[8 ..< dataStart]).copyBytes(from: headerBytes)
            var offset = dataStart
            for (_, tensor) in sorted {
                for scalar in tensor.scalars {
                    if half {
                        out.storeBytes(of: Float16(scalar).bitPattern.littleEndian, toByteOffset: offset, as: UInt16.self)
                    } else {
                        out.storeBytes(of: scalar.bitPattern.littleEndian, toByteOffset: offset, as: UInt32.self)
                    }
                    offset += dtype.byteSize
                }
            }
        }
        try file.write(to: url, options: .atomic)
    }
}

/// JSONSerialization returns booleans as NSNumbers that also convert to Int; the format has no booleans.
private func jsonInteger(_ value: Any) -> Int? {
    guard let number = value as? NSNumber, String(cString: number.objCType) != "c" else { return nil }
    return value as? Int
}

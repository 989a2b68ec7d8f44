import Foundation

package enum ZipError: Error, LocalizedError, Equatable {
    case noEndOfCentralDirectory(source: String, fileSize: Int)
    case multiDisk(source: String)
    case truncated(source: String, what: String, offset: Int, length: Int, fileSize: Int)
    case badSignature(source: String, what: String, offset: Int)
    case compressed(source: String, entry: String, method: Int)
    case encrypted(source: String, entry: String)
    case sizeMismatch(source: String, entry: String, compressed: UInt64, uncompressed: UInt64)
    case duplicateEntry(source: String, entry: String)

    package var errorDescription: String? {
        switch self {
        case let .noEndOfCentralDirectory(source, fileSize):
            "\(source) (\(fileSize) bytes) has no zip end-of-central-directory record: truncated or not a zip"
        case let .multiDisk(source):
            "\(source) is a multi-disk zip archive, which PyTorch never writes"
        case let .truncated(source, what, offset, length, fileSize):
            "\(source): the zip \(what) at offset \(offset) (\(length) bytes) extends past the end of the "
                + "\(fileSize)-byte file (truncated?)"
        case let .badSignature(source, what, offset):
            "\(source): no zip \(what) signature at offset \(offset) (corrupt archive)"
        case let .compressed(source, entry, method):
            "\(source): zip entry '\(entry)' is compressed (method \(method)); PyTorch stores entries "
                + "uncompressed and only those are read"
        case let .encrypted(source, entry):
            "\(source): zip entry '\(entry)' is encrypted"
        case let .sizeMismatch(source, entry, compressed, uncompressed):
            "\(source): stored zip entry '\(entry)' has \(compressed) bytes but declares \(uncompressed) uncompressed"
        case let .duplicateEntry(source, entry):
            "\(source): zip entry '\(entry)' appears twice"
        }
    }
}

/// A zip archive of stored (uncompressed) entries over bytes in memory, as PyTorch writes its
/// checkpoints: entries are found through the central directory (ZIP64 where the archive has
/// it) and every offset and size is checked against the data before an entry is handed out.
package struct ZipArchive: Sendable {
    /// The local file header signature that opens every zip archive written from the start.
    package static let signature: [UInt8] = [0x50, 0x4B, 0x03, 0x04]

    /// Byte ranges of the entries' contents in the archive's data, by entry name.
    package let entries: [String: Range<Int>]

    package init(data: Data, source: String) throws {
        let reader = ByteReader(data: data, source: source)
        let directory = try reader.centralDirectory()
        var entries: [String: Range<Int>] = [:]
        var offset = directory.offset
        for _ in 0 ..< directory.count {
            let (name, range, next) = try reader.entry(at: offset, directoryEnd: directory.offset + directory.size)
            guard entries.updateValue(range, forKey: name) == nil else {
                throw ZipError.duplicateEntry(source: source, entry: name)
            }
            offset = next
        }
        self.entries = entries
    }
}

/// Little-endian fields of a zip archive, each read only after its range is checked.
private struct ByteReader {
    let data: Data
    let source: String

    func check(_ what: String, _ offset: Int, _ length: Int) throws {
        guard offset >= 0, length >= 0, offset <= data.count, length <= data.count - offset else {
            throw ZipError.truncated(source: source, what: what, offset: offset, length: length, fileSize: data.count)
        }
    }

    func integer<T: FixedWidthInteger>(_ offset: Int, as type: T.Type = T.self) -> T {
        data.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
    }

    func expect(_ signature: UInt32, _ what: String, at offset: Int, length: Int) throws {
        try check(what, offset, length)
        guard integer(offset, as: UInt32.self) == signature else {
            throw ZipError.badSignature(source: source, what: what, offset: offset)
        }
    }

    /// Offset, size and entry count of the central directory, from the end record (22 bytes plus
    /// a comment of up to 65,535 bytes at the end of the file) or its ZIP64 form.
    func centralDirectory() throws -> (offset: Int, size: Int, count: Int) {
        let lowest = max(0, data.count - 22 - 0xFFFF)
        guard let end = stride(from: data.count - 22, through: lowest, by: -1).first(where: {
            integer($0, as: UInt32.self) == 0x0605_4B50 && $0 + 22 + Int(integer($0 + 20, as: UInt16.self)) == data.count
        }) else {
            throw ZipError.noEndOfCentralDirectory(source: source, fileSize: data.count)
        }
        guard integer(end + 4, as: UInt16.self) == 0, integer(end + 6, as: UInt16.self) == 0 else {
            throw ZipError.multiDisk(source: source)
        }
        var count = UInt64(integer(end + 10, as: UInt16.self))
        var size = UInt64(integer(end + 12, as: UInt32.self))
        var offset = UInt64(integer(end + 16, as: UInt32.self))
        // The ZIP64 locator sits just before the end record; PyTorch writes it for every archive.
        if end >= 20, integer(end - 20, as: UInt32.self) == 0x0706_4B50 {
            let record = try position(integer(end - 12, as: UInt64.self), "ZIP64 end record")
            try expect(0x0606_4B50, "ZIP64 end record", at: record, length: 56)
            count = integer(record + 32, as: UInt64.self)
            size = integer(record + 40, as: UInt64.self)
            offset = integer(record + 48, as: UInt64.self)
        }
        let start = try position(offset, "central directory")
        let length = try position(size, "central directory")
        try check("central directory", start, length)
        // Each directory entry takes at least 46 bytes, which bounds a believable count.
        guard count <= UInt64(length / 46) else {
            throw ZipError.truncated(source: source, what: "central directory of \(count) entries",
                                     offset: start, length: length, fileSize: data.count)
        }
        return (start, length, Int(count))
    }

    func position(_ value: UInt64, _ what: String) throws -> Int {
        guard value <= UInt64(data.count) else {
            throw ZipError.truncated(source: source, what: what, offset: Int(clamping: value), length: 0, fileSize: data.count)
        }
        return Int(value)
    }

    /// The central directory entry at `offset`: its name, the range of its stored contents
    /// (after the local header, whose name and extra field lengths may differ) and the next entry.
    func entry(at offset: Int, directoryEnd: Int) throws -> (name: String, range: Range<Int>, next: Int) {
        try expect(0x0201_4B50, "central directory entry", at: offset, length: 46)
        let flags = integer(offset + 8, as: UInt16.self)
        let method = integer(offset + 10, as: UInt16.self)
        var compressed = UInt64(integer(offset + 20, as: UInt32.self))
        var uncompressed = UInt64(integer(offset + 24, as: UInt32.self))
        let nameLength = Int(integer(offset + 28, as: UInt16.self))
        let extraLength = Int(integer(offset + 30, as: UInt16.self))
        let commentLength = Int(integer(offset + 32, as: UInt16.self))
        var local = UInt64(integer(offset + 42, as: UInt32.self))
        let next = offset + 46 + nameLength + extraLength + commentLength
        guard next <= directoryEnd else {
            throw ZipError.truncated(source: source, what: "central directory entry", offset: offset,
                                     length: next - offset, fileSize: data.count)
        }
        let name = String(decoding: data[data.startIndex + offset + 46 ..< data.startIndex + offset + 46 + nameLength],
                          as: UTF8.self)
        guard method == 0 else { throw ZipError.compressed(source: source, entry: name, method: Int(method)) }
        guard flags & 1 == 0 else { throw ZipError.encrypted(source: source, entry: name) }

        // ZIP64 extended information (tag 1): the 64-bit values of the fields saturated above, in order.
        var field = offset + 46 + nameLength
        let extraEnd = field + extraLength
        while field + 4 <= extraEnd {
            let tag = integer(field, as: UInt16.self)
            let size = Int(integer(field + 2, as: UInt16.self))
            var value = field + 4
            let valueEnd = value + size
            guard valueEnd <= extraEnd else { break }
            func widen(_ field: inout UInt64) {
                guard tag == 1, field == 0xFFFF_FFFF, value + 8 <= valueEnd else { return }
                field = integer(value, as: UInt64.self)
                value += 8
            }
            widen(&uncompressed)
            widen(&compressed)
            widen(&local)
            field = valueEnd
        }
        guard compressed == uncompressed else {
            throw ZipError.sizeMismatch(source: source, entry: name, compressed: compressed, uncompressed: uncompressed)
        }
        let header = try position(local, "local header of '\(name)'")
        try expect(0x0403_4B50, "local header of '\(name)'", at: header, length: 30)
        let start = header + 30 + Int(integer(header + 26, as: UInt16.self)) + Int(integer(header + 28, as: UInt16.self))
        let length = try position(compressed, "contents of '\(name)'")
        try check("contents of '\(name)'", start, length)
        return (name, start ..< start + length, next)
    }
}

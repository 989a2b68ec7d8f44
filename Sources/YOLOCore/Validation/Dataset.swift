import Foundation
import Yams

/// A detection dataset described by an Ultralytics data YAML (`path`, `train`, `val`, `test`,
/// `names` as a list or an index → name map, or `nc`), its paths resolved as Ultralytics'
/// `check_det_dataset` resolves them.
public struct Dataset: Sendable, Equatable {
    /// The YAML file.
    public let url: URL
    /// The dataset root: `path` (relative: against the current directory if it exists there,
    /// else against the YAML's folder), or the YAML's folder.
    public let root: URL
    /// Class names by index.
    public let names: [String]
    /// Image sources of each split present (folders, `.txt` lists or image files), absolute.
    public let splits: [String: [URL]]

    /// Most classes a data YAML may give (`nc` or `names`): far above the largest public
    /// detection datasets (LVIS has 1203), and a names table of a few MB.
    public static let maxClasses = 100_000
    /// Largest data YAML read, in bytes: the largest Ultralytics data YAML is ~50 KB.
    public static let maxYAMLBytes = 1 << 20
    /// Largest `.txt` list of images read, in bytes: Objects365's 1.7 million train images take
    /// ~70 MB.
    public static let maxImageListBytes = 256 << 20
    /// Largest label file read, in bytes; a larger one counts as corrupt. Dense and polygon
    /// label files run to ~100 KB.
    public static let maxLabelFileBytes = 16 << 20

    /// Reads and checks a data YAML; throws `DatasetError` naming the file and what is wrong.
    /// The YAML is composed as a node tree whose aliases are bounded (see `YAMLMapping`).
    public init(contentsOf url: URL) throws {
        let text: String
        do {
            text = try readText(url, limit: Self.maxYAMLBytes)
        } catch {
            throw DatasetError.unreadable(path: url.path, reason: error.reason)
        }
        try self.init(yaml: text, url: url)
    }

    /// The data YAML `text` as if read from `url` (the fuzz harness's entry).
    package init(yaml text: String, url: URL) throws {
        self.url = url
        let document: YAMLMapping
        do {
            document = try YAMLMapping(yaml: text)
        } catch {
            throw DatasetError.invalidYAML(path: url.path, reason: error.reason)
        }
        // A key given as null counts as absent, as Ultralytics' `data.get(key)` does.
        var data = document.values.filter { $0.value.kind != .null }
        if data["val"] == nil { data["val"] = data["validation"] }
        guard data["val"] != nil else {
            throw DatasetError.missingKey(path: url.path, key: "val", reason: "the validation images")
        }
        func invalid(_ key: String, _ reason: String) -> DatasetError { .invalidValue(path: url.path, key: key, reason: reason) }
        func describe(_ node: Node) -> String {
            switch node {
            case let .scalar(scalar): quoted(scalar.string)
            case .sequence: "a list"
            case .mapping: "a mapping"
            case .alias: "an alias"
            }
        }

        // Names from `names` (a list or a map of indices 0…n-1 to names) or `nc`.
        var names: [String]
        switch data["names"] {
        case let .sequence(list)?:
            guard list.count <= Self.maxClasses else {
                throw invalid("names", "\(list.count) names, more than the \(Self.maxClasses) classes a dataset may have")
            }
            names = try list.enumerated().map { index, node in
                guard let name = node.scalar?.string else { throw invalid("names", "class \(index) is \(describe(node)), not a name") }
                return name
            }
        case let .mapping(map)?:
            guard map.count <= Self.maxClasses else {
                throw invalid("names", "\(map.count) names, more than the \(Self.maxClasses) classes a dataset may have")
            }
            var byIndex = [Int: String]()
            for (key, value) in map {
                guard let index = key.integer ?? key.scalar.flatMap({ Int($0.string) }) else {
                    throw invalid("names", "class index \(describe(key)) is not an integer")
                }
                guard let name = value.scalar?.string else { throw invalid("names", "class \(index) is \(describe(value)), not a name") }
                byIndex[index] = name
            }
            let indices = byIndex.keys.sorted()
            guard indices == Array(0..<indices.count) else {
                throw invalid("names", "a \(indices.count)-class dataset needs class indices 0-\(indices.count - 1), not "
                    + indices.prefix(20).map(String.init).joined(separator: ", ") + (indices.count > 20 ? ", …" : ""))
            }
            names = byIndex.sorted { $0.key < $1.key }.map(\.value)
        case nil:
            names = []
        case let node?:
            throw invalid("names", "must be a list or a map of class index to name, not \(describe(node))")
        }
        if let node = data["nc"] {
            // Ultralytics takes integer-like values (10, 10.0, '10'), not 1.9 or placeholders.
            let value = node.integer.map(Double.init) ?? node.scalar.flatMap { Double($0.string.replacingOccurrences(of: "_", with: "")) }
            guard let value, value.isFinite, value == value.rounded() else {
                throw invalid("nc", "must be an integer, not \(describe(node))")
            }
            guard (1...Double(Self.maxClasses)).contains(value) else {
                throw invalid("nc", "\(describe(node)) is out of range: a dataset has 1 to \(Self.maxClasses) classes")
            }
            let nc = Int(value)
            if data["names"] == nil {
                names = (0..<nc).map { "class_\($0)" }
            } else if names.count != nc {
                throw invalid("nc", "\(nc) does not match the \(names.count) names")
            }
        } else if data["names"] == nil {
            throw DatasetError.missingKey(path: url.path, key: "names", reason: "the class names (or 'nc', their number)")
        }
        guard !names.isEmpty else { throw invalid("names", "no classes") }
        self.names = names

        let folder = url.deletingLastPathComponent()
        if let node = data["path"], node.kind != .str {
            throw invalid("path", "must be a string, not \(describe(node))")
        }
        if let path = data["path"]?.string, !path.isEmpty {
            let relative = URL(fileURLWithPath: path)
            root = path.hasPrefix("/") || FileManager.default.fileExists(atPath: relative.path)
                ? relative.standardizedFileURL : folder.appendingPathComponent(path).standardizedFileURL
        } else {
            root = folder.standardizedFileURL
        }
        var splits = [String: [URL]]()
        for key in ["train", "val", "test", "minival"] {
            let entries: [String]
            switch data[key] {
            case nil: continue
            case let node? where node.kind == .str:
                entries = [node.string ?? ""]
            case let .sequence(many)? where many.allSatisfy({ $0.kind == .str }):
                entries = many.map { $0.string ?? "" }
            case let node?:
                throw invalid(key, "must be a path or a list of paths, not \(describe(node))")
            }
            splits[key] = entries.map { [root] entry in
                let resolved = entry.hasPrefix("/") ? URL(fileURLWithPath: entry) : root.appendingPathComponent(entry)
                // Ultralytics retries a missing '../x' as 'x' inside the root.
                if !FileManager.default.fileExists(atPath: resolved.path) && entry.hasPrefix("../") {
                    return root.appendingPathComponent(String(entry.dropFirst(3))).standardizedFileURL
                }
                return resolved.standardizedFileURL
            }
        }
        self.splits = splits
    }

    /// The image files of `split`, sorted by path: every file with an image extension under its
    /// folders (recursively), the lines of its `.txt` lists ("./x" relative to the list's folder)
    /// and its image files.
    public func imageFiles(split: String) throws -> [URL] {
        guard let sources = splits[split] else {
            throw DatasetError.missingKey(path: url.path, key: split, reason: "the images of the split to validate")
        }
        let fm = FileManager.default
        var files = [String]()
        for source in sources {
            var isDirectory: ObjCBool = false
            guard fm.fileExists(atPath: source.path, isDirectory: &isDirectory) else {
                throw DatasetError.missingImages(path: url.path, split: split, source: source.path)
            }
            if isDirectory.boolValue {
                // Symbolic links count as what they point to, as in Python's glob.
                let walker = fm.enumerator(at: source, includingPropertiesForKeys: nil, options: [.skipsHiddenFiles])
                while let file = walker?.nextObject() as? URL {
                    var isFolder: ObjCBool = false
                    if fm.fileExists(atPath: file.path, isDirectory: &isFolder), !isFolder.boolValue { files.append(file.path) }
                }
            } else if source.pathExtension.lowercased() == "txt" {
                let text: String
                do {
                    text = try readText(source, limit: Self.maxImageListBytes)
                } catch {
                    throw DatasetError.unreadable(path: source.path, reason: error.reason)
                }
                let parent = source.deletingLastPathComponent().path + "/"
                for line in text.split(whereSeparator: \.isNewline) {
                    let entry = line.trimmingCharacters(in: .whitespaces).replacingOccurrences(of: "\u{FEFF}", with: "")
                    guard !entry.isEmpty else { continue }
                    files.append(entry.hasPrefix("./") ? parent + entry.dropFirst(2) : entry)
                }
            } else {
                files.append(source.path)
            }
        }
        let images = files.filter { MediaFiles.imageExtensions.contains(($0 as NSString).pathExtension.lowercased()) }.sorted()
        guard !images.isEmpty else {
            throw DatasetError.noImages(split: split, sources: sources.map(\.path))
        }
        return images.map { URL(fileURLWithPath: $0) }
    }

    /// Ultralytics `img2label_paths`: the last `/images/` of the path becomes `/labels/` and the
    /// extension `.txt`.
    public static func labelFile(for image: URL) -> URL {
        var path = image.path
        if let range = path.range(of: "/images/", options: .backwards) {
            path.replaceSubrange(range, with: "/labels/")
        }
        if let dot = path.lastIndex(of: ".") { path = String(path[..<dot]) }
        return URL(fileURLWithPath: path + ".txt")
    }
}

/// One image of a split with its labels, as the label check accepted them.
public struct LabeledImage: Sendable, Equatable {
    public let image: URL
    /// Size after EXIF orientation.
    public let width, height: Int
    /// Class of each object.
    public var classes: [Int]
    /// Boxes as normalized `cx, cy, w, h`.
    public var boxes: [SIMD4<Float>]
}

/// The label check of a split: what Ultralytics' "Scanning …" line reports, with its messages.
public struct DatasetScan: Sendable, Equatable, Codable {
    /// Images with a label file, without one (backgrounds), with an empty one, and dropped as
    /// corrupt (unreadable image or invalid label file).
    public var found = 0, missing = 0, empty = 0, corrupt = 0
    /// One message per problem, naming the file: corrupt images and labels, duplicate rows removed.
    public var warnings: [String] = []

    /// "4 images, 0 backgrounds, 0 corrupt", as Ultralytics prints it.
    public var summary: String { "\(found) images, \(missing + empty) backgrounds, \(corrupt) corrupt" }
}

extension Dataset {
    /// Checks every image of `split` and its label file as Ultralytics' `verify_image_label`
    /// does, keeping the valid ones; problems are counted and reported in the scan, not thrown.
    /// Images larger than `maxPixels` count as corrupt. Throws when the split has no images or
    /// none is valid.
    public func labeledImages(split: String, maxPixels: Int = Image.defaultMaxPixels) throws
        -> (images: [LabeledImage], scan: DatasetScan) {
        var scan = DatasetScan(), images = [LabeledImage]()
        for file in try imageFiles(split: split) {
            switch checkImageLabel(file, classCount: names.count, maxPixels: maxPixels) {
            case let .valid(image, label, warning):
                images.append(image)
                switch label {
                case .found: scan.found += 1
                case .missing: scan.missing += 1
                case .empty: scan.found += 1; scan.empty += 1
                }
                if let warning { scan.warnings.append(warning) }
            case let .corrupt(labelFound, reason):
                scan.corrupt += 1
                if labelFound { scan.found += 1 }
                scan.warnings.append("\(file.path): ignoring corrupt image/label: \(reason)")
            }
        }
        guard !images.isEmpty else { throw DatasetError.noValidImages(split: split, problems: scan.warnings) }
        return (images, scan)
    }
}

enum LabelFileState { case found, missing, empty }

enum LabelCheck {
    case valid(LabeledImage, LabelFileState, warning: String?)
    /// `labelFound`: the label file exists (Ultralytics counts it as found even so).
    case corrupt(labelFound: Bool, reason: String)
}

/// Ultralytics `verify_image_label` for a detection dataset: the image must decode and be at
/// least 10 pixels a side; label rows are `class cx cy w h` (or `class x y x y …` polygons, made
/// boxes), normalized with 1 % tolerance, classes whole numbers below `classCount`; duplicate
/// rows are removed with a warning (the rest sorted, as `np.unique` leaves them).
func checkImageLabel(_ file: URL, classCount: Int, maxPixels: Int) -> LabelCheck {
    let image: Image
    do {
        image = try Image(contentsOf: file, maxPixels: maxPixels)
    } catch {
        return .corrupt(labelFound: false, reason: (error as? LocalizedError)?.errorDescription ?? "\(error)")
    }
    guard image.height > 9 && image.width > 9 else {
        return .corrupt(labelFound: false, reason: "image size (\(image.height), \(image.width)) <10 pixels")
    }
    let labelURL = Dataset.labelFile(for: file)
    func labeled(_ rows: [[Float]], _ state: LabelFileState, _ warning: String? = nil) -> LabelCheck {
        .valid(LabeledImage(image: file, width: image.width, height: image.height, classes: rows.map { Int($0[0]) },
                            boxes: rows.map { SIMD4($0[1], $0[2], $0[3], $0[4]) }), state, warning: warning)
    }
    // Ultralytics' `os.path.isfile`: a folder in the label's place is no label.
    var isFolder: ObjCBool = false
    guard FileManager.default.fileExists(atPath: labelURL.path, isDirectory: &isFolder), !isFolder.boolValue else {
        return labeled([], .missing)
    }
    do throws(DatasetProblem) {
        let text: String
        do {
            text = try readText(labelURL, limit: Dataset.maxLabelFileBytes)
        } catch {
            throw DatasetProblem("\(labelURL.path): \(error.reason)")
        }
        let (rows, duplicates) = try labelRows(text, classCount: classCount)
        guard !rows.isEmpty else { return labeled([], .empty) }
        return labeled(rows, .found, duplicates > 0 ? "\(file.path): \(duplicates) duplicate labels removed" : nil)
    } catch {
        return .corrupt(labelFound: true, reason: error.reason)
    }
}

/// The rows `class cx cy w h` of a label file's text by Ultralytics' rules (see
/// `checkImageLabel`), duplicates removed (then sorted, as `np.unique` leaves them), and how many
/// were; throws the reason the file is corrupt.
package func labelRows(_ text: String, classCount: Int) throws(DatasetProblem) -> (rows: [[Float]], duplicates: Int) {
    // Each non-blank line's fields with its number in the file, for messages.
    let lines = text.replacingOccurrences(of: "\u{FEFF}", with: "").split(omittingEmptySubsequences: false, whereSeparator: \.isNewline)
        .enumerated().map { (number: $0.offset + 1, fields: $0.element.split(whereSeparator: \.isWhitespace)) }
        .filter { !$0.fields.isEmpty }
    guard !lines.isEmpty else { return ([], 0) }
    // Ultralytics' message, then the line it is about.
    func problem(_ message: String, line index: Int?) -> DatasetProblem {
        DatasetProblem(message + (index.map { " (line \(lines[$0].number))" } ?? ""))
    }
    func numbers(_ index: Int) throws(DatasetProblem) -> [Float] {
        try lines[index].fields.map { field throws(DatasetProblem) in
            guard let value = Float(field) else { throw problem("could not convert string to float: \(quoted(field))", line: index) }
            return value
        }
    }
    var rows: [[Float]], polygons = [[Float]]()
    if lines.contains(where: { $0.fields.count > 6 }) {
        // Polygons: each row becomes the box around its points.
        if let mixed = lines.firstIndex(where: { $0.fields.count == 5 }) {
            throw problem("labels mix segment and detection rows", line: mixed)
        }
        rows = try lines.indices.map { index throws(DatasetProblem) in
            let values = try numbers(index)
            polygons.append(values)
            let points = values.dropFirst()
            guard points.count % 2 == 0 else {
                throw problem("a polygon row has an odd number (\(points.count)) of coordinates", line: index)
            }
            let xs = stride(from: 1, to: values.count, by: 2).map { values[$0] }
            let ys = stride(from: 2, to: values.count, by: 2).map { values[$0] }
            guard let x1 = xs.min(), let y1 = ys.min(), let x2 = xs.max(), let y2 = ys.max() else {
                throw problem("a polygon row has a class and no points", line: index)
            }
            return [values[0], (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
        }
    } else {
        if let ragged = lines.firstIndex(where: { $0.fields.count != lines[0].fields.count }) {
            throw problem("rows have different numbers of columns: " + excerpt(lines.map(\.fields.count)), line: ragged)
        }
        rows = try lines.indices.map(numbers)
        guard rows[0].count == 5 else { throw problem("labels require 5 columns, \(rows[0].count) columns detected", line: 0) }
    }
    func firstRow(where bad: ([Float]) -> Bool) -> Int? { rows.firstIndex(where: bad) }
    // NaN fails every check below as it fails NumPy's: it is no number ≤ 1.01, its minimum is
    // NaN, and NaN % 1 is no 0.
    let outside = rows.flatMap { $0.dropFirst() }.filter { !($0 <= 1.01) }
    guard outside.isEmpty else {
        throw problem("non-normalized or out of bounds coordinates \(excerpt(outside))",
                      line: firstRow { $0.dropFirst().contains { !($0 <= 1.01) } })
    }
    let all = rows.flatMap { $0 }
    let lowest = all.contains { $0.isNaN } ? .nan : all.reduce(.infinity, min)
    let smallestSize = rows.map { min($0[3], $0[4]) }.reduce(.infinity, min)
    guard lowest >= 0 || (lowest >= -0.01 && smallestSize >= 0) else {
        throw problem("negative label values \(excerpt(all.filter { $0 < 0 }))", line: firstRow { $0.contains { !($0 >= 0) } })
    }
    // Python's `c % 1 == 0`: whole and finite.
    func whole(_ c: Float) -> Bool { c.isFinite && c == c.rounded(.down) }
    let fractional = rows.map { $0[0] }.filter { !whole($0) }
    guard fractional.isEmpty else {
        throw problem("non-integer class labels \(excerpt(fractional))", line: firstRow { !whole($0[0]) })
    }
    let largest = rows.map { $0[0] }.reduce(0, max)
    guard largest < Float(classCount) else {
        throw problem("Label class \(Int(exactly: largest).map(String.init) ?? "\(largest)") exceeds dataset class count "
                      + "\(classCount). Possible class labels are 0-\(classCount - 1)", line: firstRow { $0[0] == largest })
    }
    let unique = Set(rows)
    guard unique.count < rows.count else { return (rows, 0) }
    guard !polygons.isEmpty else { return (unique.sorted { $0.lexicographicallyPrecedes($1) }, rows.count - unique.count) }
    // Distinct polygons may share a class and box: Ultralytics then keeps the first of each
    // polygon, ordered by its float32 bytes (`np.unique` of `class.tobytes() + segment.tobytes()`).
    var first = [[UInt8]: Int]()
    for (index, polygon) in polygons.enumerated() {
        let bytes = polygon.flatMap { withUnsafeBytes(of: $0.bitPattern.littleEndian, Array.init) }
        if first[bytes] == nil { first[bytes] = index }
    }
    guard first.count < rows.count else { return (rows, 0) }
    return (first.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map { rows[$0.value] }, rows.count - first.count)
}

/// A value quoted for a message, cut after 60 characters.
private func quoted(_ text: some StringProtocol) -> String {
    "'" + (text.count > 60 ? String(text.prefix(60)) + "…" : String(text)) + "'"
}

/// At most 10 values of a list for a message, as NumPy shortens long arrays: "[1.5, 2.0]",
/// "[1.5, …] (1000 values)".
private func excerpt<T>(_ values: [T]) -> String {
    values.count <= 10 ? "\(values)" : "\(Array(values.prefix(10))) … (\(values.count) values)"
}

/// The UTF-8 text of a file of at most `limit` bytes; throws why it cannot be read, is longer
/// (special files such as /dev/zero included, whose size the file system does not give) or is
/// no UTF-8.
func readText(_ url: URL, limit: Int) throws(DatasetProblem) -> String {
    let data: Data
    do {
        let handle = try FileHandle(forReadingFrom: url)
        defer { try? handle.close() }
        data = try handle.read(upToCount: limit + 1) ?? Data()
    } catch {
        throw DatasetProblem((error as NSError).localizedDescription)
    }
    guard data.count <= limit else { throw DatasetProblem("larger than \(limit) bytes") }
    guard let text = String(data: data, encoding: .utf8) else { throw DatasetProblem("not UTF-8 text") }
    return text
}

/// Why a label file or a dataset file is unusable, as its message.
package struct DatasetProblem: Error, LocalizedError {
    package let reason: String
    init(_ reason: String) { self.reason = reason }
    package var errorDescription: String? { reason }
}

/// A data YAML or split that cannot be used.
public enum DatasetError: Error, LocalizedError, Equatable {
    /// The file cannot be read.
    case unreadable(path: String, reason: String)
    /// The file is not YAML, or not a mapping.
    case invalidYAML(path: String, reason: String)
    /// A required key is absent.
    case missingKey(path: String, key: String, reason: String)
    /// A key has a value of the wrong kind.
    case invalidValue(path: String, key: String, reason: String)
    /// A split's image folder, list or file does not exist.
    case missingImages(path: String, split: String, source: String)
    /// A split's sources hold no image files.
    case noImages(split: String, sources: [String])
    /// Every image of a split is corrupt or has a corrupt label file.
    case noValidImages(split: String, problems: [String])

    public var errorDescription: String? {
        switch self {
        case let .unreadable(path, reason): "cannot read \(path): \(reason)"
        case let .invalidYAML(path, reason): "data YAML \(path) is not valid: \(reason)"
        case let .missingKey(path, key, reason): "data YAML \(path) has no '\(key):' key; it must give \(reason)"
        case let .invalidValue(path, key, reason): "data YAML \(path): '\(key)' is invalid: \(reason)"
        case let .missingImages(path, split, source): "\(split) images of \(path) not found: \(source) does not exist"
        case let .noImages(split, sources):
            "no images in the \(split) split (\(sources.joined(separator: ", "))); image extensions are "
                + MediaFiles.imageExtensions.sorted().joined(separator: ", ")
        case let .noValidImages(split, problems):
            "no valid images in the \(split) split:\n  " + problems.joined(separator: "\n  ")
        }
    }
}

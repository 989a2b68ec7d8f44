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

    /// Reads and checks a data YAML; throws `DatasetError` naming the file and what is wrong.
    public init(contentsOf url: URL) throws {
        self.url = url
        let text: String
        do {
            text = try String(contentsOf: url, encoding: .utf8)
        } catch {
            throw DatasetError.unreadable(path: url.path, reason: (error as NSError).localizedDescription)
        }
        let loaded: Any?
        do {
            loaded = try Yams.load(yaml: text)
        } catch {
            throw DatasetError.invalidYAML(path: url.path, reason: "\(error)")
        }
        guard var data = loaded as? [AnyHashable: Any] else {
            throw DatasetError.invalidYAML(path: url.path, reason: "the document is not a mapping of keys to values")
        }
        func present(_ key: String) -> Bool { data[key].map { !($0 is NSNull) } ?? false }
        if !present("val") && present("validation") { data["val"] = data["validation"] }
        guard present("val") else {
            throw DatasetError.missingKey(path: url.path, key: "val", reason: "the validation images")
        }

        // Names from `names` (a list or a map of indices 0…n-1) or `nc`.
        var names: [String]
        if let list = data["names"] as? [Any] {
            names = list.map { "\($0)" }
        } else if let map = data["names"] as? [AnyHashable: Any] {
            var byIndex = [Int: String]()
            for (key, value) in map {
                guard let index = key.base as? Int ?? Int("\(key.base)") else {
                    throw DatasetError.invalidValue(path: url.path, key: "names", reason: "class index '\(key.base)' is not an integer")
                }
                byIndex[index] = "\(value)"
            }
            guard byIndex.keys.sorted() == Array(0..<byIndex.count) else {
                throw DatasetError.invalidValue(path: url.path, key: "names", reason:
                    "a \(byIndex.count)-class dataset needs class indices 0-\(byIndex.count - 1), not "
                    + byIndex.keys.sorted().map(String.init).joined(separator: ", "))
            }
            names = byIndex.keys.sorted().map { byIndex[$0]! }
        } else if present("names") {
            throw DatasetError.invalidValue(path: url.path, key: "names", reason: "must be a list or a map of class index to name")
        } else {
            names = []
        }
        if present("nc") {
            guard let nc = data["nc"] as? Int ?? (data["nc"] as? Double).flatMap({ $0 == $0.rounded() ? Int($0) : nil }), nc >= 0 else {
                throw DatasetError.invalidValue(path: url.path, key: "nc", reason: "'\(data["nc"]!)' must be an integer")
            }
            if !present("names") {
                names = (0..<nc).map { "class_\($0)" }
            } else if names.count != nc {
                throw DatasetError.invalidValue(path: url.path, key: "nc", reason: "\(nc) does not match the \(names.count) names")
            }
        } else if !present("names") {
            throw DatasetError.missingKey(path: url.path, key: "names", reason: "the class names (or 'nc', their number)")
        }
        guard !names.isEmpty else { throw DatasetError.invalidValue(path: url.path, key: "names", reason: "no classes") }
        self.names = names

        let folder = url.deletingLastPathComponent()
        if let path = data["path"] as? String, !path.isEmpty {
            let relative = URL(fileURLWithPath: path)
            root = path.hasPrefix("/") || FileManager.default.fileExists(atPath: relative.path)
                ? relative.standardizedFileURL : folder.appendingPathComponent(path).standardizedFileURL
        } else if present("path") && !(data["path"] is String) {
            throw DatasetError.invalidValue(path: url.path, key: "path", reason: "must be a string")
        } else {
            root = folder.standardizedFileURL
        }
        var splits = [String: [URL]]()
        for key in ["train", "val", "test", "minival"] where present(key) {
            let entries: [String]
            if let one = data[key] as? String {
                entries = [one]
            } else if let many = data[key] as? [Any], many.allSatisfy({ $0 is String }) {
                entries = many.map { $0 as! String }
            } else {
                throw DatasetError.invalidValue(path: url.path, key: key, reason: "must be a path or a list of paths")
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
                    text = try String(contentsOf: source, encoding: .utf8)
                } catch {
                    throw DatasetError.unreadable(path: source.path, reason: (error as NSError).localizedDescription)
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
    guard FileManager.default.fileExists(atPath: labelURL.path) else { return labeled([], .missing) }
    guard let data = FileManager.default.contents(atPath: labelURL.path),
          let text = String(data: data, encoding: .utf8) else {
        return .corrupt(labelFound: true, reason: "\(labelURL.path) is not readable UTF-8 text")
    }
    let lines = text.replacingOccurrences(of: "\u{FEFF}", with: "").split(whereSeparator: \.isNewline)
        .map { $0.split(whereSeparator: \.isWhitespace).map(String.init) }.filter { !$0.isEmpty }
    guard !lines.isEmpty else { return labeled([], .empty) }
    func numbers(_ fields: [String]) throws(LabelError) -> [Float] {
        try fields.map { field throws(LabelError) in
            guard let value = Float(field) else { throw LabelError("could not convert string to float: '\(field)'") }
            return value
        }
    }
    do throws(LabelError) {
        var rows: [[Float]]
        if lines.contains(where: { $0.count > 6 }) {
            // Polygons: each row becomes the box around its points.
            guard !lines.contains(where: { $0.count == 5 }) else { throw LabelError("labels mix segment and detection rows") }
            rows = try lines.map { line throws(LabelError) in
                let values = try numbers(line)
                let points = values.dropFirst()
                guard points.count % 2 == 0 else { throw LabelError("a polygon row has an odd number (\(points.count)) of coordinates") }
                let xs = stride(from: 1, to: values.count, by: 2).map { values[$0] }
                let ys = stride(from: 2, to: values.count, by: 2).map { values[$0] }
                let (x1, y1, x2, y2) = (xs.min()!, ys.min()!, xs.max()!, ys.max()!)
                return [values[0], (x1 + x2) / 2, (y1 + y2) / 2, x2 - x1, y2 - y1]
            }
        } else {
            guard Set(lines.map(\.count)).count == 1 else {
                throw LabelError("rows have different numbers of columns: " + lines.map { String($0.count) }.joined(separator: ", "))
            }
            rows = try lines.map(numbers)
            guard rows[0].count == 5 else { throw LabelError("labels require 5 columns, \(rows[0].count) columns detected") }
        }
        let points = rows.flatMap { $0.dropFirst() }
        let outside = points.filter { !($0 <= 1.01) }
        guard outside.isEmpty else { throw LabelError("non-normalized or out of bounds coordinates \(outside)") }
        let all = rows.flatMap { $0 }
        let lowest = all.min()!, smallestSize = rows.flatMap { $0[3...4] }.min()!
        guard lowest >= 0 || (lowest >= -0.01 && smallestSize >= 0) else {
            throw LabelError("negative label values \(all.filter { $0 < 0 })")
        }
        let classes = rows.map { $0[0] }
        let fractional = classes.filter { $0 != $0.rounded(.down) }
        guard fractional.isEmpty else { throw LabelError("non-integer class labels \(fractional)") }
        let largest = classes.max()!
        guard largest < Float(classCount) else {
            throw LabelError("Label class \(Int(largest)) exceeds dataset class count \(classCount). "
                             + "Possible class labels are 0-\(classCount - 1)")
        }
        let unique = Set(rows)
        guard unique.count < rows.count else { return labeled(rows, .found) }
        let sorted = unique.sorted { $0.lexicographicallyPrecedes($1) }
        return labeled(sorted, .found, "\(file.path): \(rows.count - sorted.count) duplicate labels removed")
    } catch {
        return .corrupt(labelFound: true, reason: error.reason)
    }
}

struct LabelError: Error {
    let reason: String
    init(_ reason: String) { self.reason = reason }
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

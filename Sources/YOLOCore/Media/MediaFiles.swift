import Foundation

/// The files a path stands for when it names images or videos to predict on: one listing for
/// `YOLOSession`'s image sources and `yolo predict`.
package enum MediaFiles {
    /// Ultralytics' `IMG_FORMATS` (only JPEG and PNG decode: `decodable`).
    package static let imageExtensions: Set = ["avif", "bmp", "dng", "heic", "heif", "jp2", "jpeg", "jpg", "mpo", "png",
                                               "tif", "tiff", "webp"]
    /// Ultralytics' `VID_FORMATS`.
    package static let videoExtensions: Set = ["asf", "avi", "gif", "m4v", "mkv", "mov", "mp4", "mpeg", "mpg", "ts", "wmv",
                                               "webm"]
    /// The image files `Image` decodes.
    package static let decodable: Set = ["jpeg", "jpg", "png"]

    /// A directory's files whose extension (any case) is in `extensions`, or the files a pattern
    /// (`frames/*.png`) matches that have one, in natural order (`img2` before `img10`); any other
    /// URL as it is. `kind` names what `extensions` stand for in errors ("JPEG or PNG image").
    package static func expand(_ url: URL, keeping extensions: Set<String>, kind: String) throws -> [URL] {
        func kept(_ name: String) -> Bool { extensions.contains((name as NSString).pathExtension.lowercased()) }
        func natural(_ a: String, _ b: String) -> Bool { a.compare(b, options: .numeric) == .orderedAscending }
        var isDirectory: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory)
        if !exists && url.path.contains(where: { "*?[".contains($0) }) {
            var matches = glob_t()
            defer { globfree(&matches) }
            guard glob(url.path, 0, nil, &matches) == 0 else {
                throw SourceError.cannotOpen(source: url.path, reason: "no file matches the pattern")
            }
            let paths = (0..<Int(matches.gl_pathc)).compactMap { matches.gl_pathv[$0].map { String(cString: $0) } }.filter(kept)
            guard !paths.isEmpty else {
                throw SourceError.cannotOpen(source: url.path, reason: "no \(kind) among the files the pattern matches")
            }
            return paths.sorted(by: natural).map { URL(fileURLWithPath: $0) }
        }
        guard exists, isDirectory.boolValue else { return [url] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: url.path)
        } catch {
            throw SourceError.cannotOpen(source: url.path, reason: error.localizedDescription)
        }
        let files = names.filter(kept).sorted(by: natural)
        guard !files.isEmpty else { throw SourceError.cannotOpen(source: url.path, reason: "the directory holds no \(kind)") }
        return files.map { url.appendingPathComponent($0) }
    }

    /// What the path names when it exists and is not a regular file ("a FIFO", "a directory", …),
    /// else nil: reading a FIFO or a device would block or never end, and writing one by rename
    /// would replace it.
    package static func irregularKind(atPath path: String) -> String? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        switch info.st_mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFDIR: return "a directory"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFIFO: return "a FIFO"
        case S_IFSOCK: return "a socket"
        default: return "a special file"
        }
    }
}

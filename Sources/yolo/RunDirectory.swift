import Foundation
import YOLOCore

/// project/name, or project/name2, name3, … if taken (Ultralytics `increment_path`). The project
/// path is resolved once (`.`, `..`, trailing slashes; relative to the current directory) and
/// created with its parents; the run folder itself is claimed by a `mkdir` that fails when it
/// exists, so concurrent runs into one project never share a folder.
func makeRunDirectory(project: String, name: String) throws -> URL {
    guard !name.isEmpty, name != ".", name != "..", !name.contains("/") else {
        throw CommandFailure(message: "--name '\(name)' must be a folder name, without '/'")
    }
    let base = URL(fileURLWithPath: project).standardizedFileURL
    func failure(_ folder: String) -> CommandFailure {
        CommandFailure(message: "cannot create the run folder \((project as NSString).appendingPathComponent(folder)): "
                       + String(cString: strerror(errno)))
    }
    // mkdir -p by hand: Foundation's errors on Linux do not say why.
    var path = ""
    for component in base.pathComponents.dropFirst() {
        path += "/" + component
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else { throw failure(name) }
    }
    var n = 1
    while true {
        let folder = n == 1 ? name : "\(name)\(n)"
        let candidate = base.appendingPathComponent(folder)
        if mkdir(candidate.path, 0o755) == 0 { return candidate }
        guard errno == EEXIST else { throw failure(folder) }
        n += 1
    }
}

/// Refuses an output path that exists and is not a regular file: safetensors files are written
/// by rename, which would replace a device node or a FIFO.
func checkRegularOutput(_ path: String) throws {
    if let kind = MediaFiles.irregularKind(atPath: path) {
        throw CommandFailure(message: "cannot write \(path): it is \(kind), not a regular file")
    }
}

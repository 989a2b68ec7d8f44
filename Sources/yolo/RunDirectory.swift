import Foundation

/// project/name, or project/name2, name3, … if it exists (Ultralytics `increment_path`).
func makeRunDirectory(project: String, name: String) throws -> URL {
    let fm = FileManager.default
    let base = URL(fileURLWithPath: project)
    var candidate = base.appendingPathComponent(name)
    var n = 2
    while fm.fileExists(atPath: candidate.path) {
        candidate = base.appendingPathComponent("\(name)\(n)")
        n += 1
    }
    // mkdir -p by hand: Foundation's errors on Linux do not say why.
    var path = project.hasPrefix("/") ? "" : "."
    for component in candidate.path.dropFirst(base.path.count - project.count).split(separator: "/") {
        path += "/" + component
        guard mkdir(path, 0o755) == 0 || errno == EEXIST else {
            throw CommandFailure(message: "cannot create the run folder \(project)/\(candidate.lastPathComponent): "
                                 + String(cString: strerror(errno)))
        }
    }
    return candidate
}

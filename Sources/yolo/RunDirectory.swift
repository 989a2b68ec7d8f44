import ArgumentParser
import Foundation
import YOLOCore

/// Where a verb saves its run: `--project`, `--name`, `--exist-ok`, as Ultralytics' keys.
struct RunFolderOptions: ParsableArguments {
    @Option(help: "Folder of the runs: runs/<task> by default; an absolute path, or a relative one inside runs/<task>, as Ultralytics places it.")
    var project: String?

    @Option(help: "Run name inside the project folder (default: the verb, e.g. predict); name-2, name-3, … when taken.")
    var name: String?

    @Flag(name: .customLong("exist-ok"), help: "Save into the run folder even if it exists, instead of numbering a new one.")
    var existOK = false

    /// The run folder of `verb` (its name unless --name) for a model of `task`.
    func make(task: String, verb: String) throws -> URL {
        try makeRunDirectory(project: project, task: task, name: name ?? verb, existOK: existOK)
    }
}

/// The run folder as Ultralytics 8.4.190 names it (`get_save_dir`, `increment_path`): `name` in
/// `runs/<task>`, in `project` when it is absolute, else in `runs/<task>/<project>`; when taken,
/// `name-2`, `name-3`, … unless `existOK` reuses it. The path is resolved once (`.`, `..`,
/// trailing slashes; relative to the current directory) and created with its parents; a new
/// folder is claimed by a `mkdir` that fails when it exists, so concurrent runs never share one.
func makeRunDirectory(project: String?, task: String, name: String, existOK: Bool) throws -> URL {
    guard !name.isEmpty, name != ".", name != "..", !name.contains("/") else {
        throw CommandFailure(message: "--name '\(name)' must be a folder name, without '/'")
    }
    let runs = "runs/" + task
    let parent = project.map { $0.hasPrefix("/") ? $0 : (runs as NSString).appendingPathComponent($0) } ?? runs
    let base = URL(fileURLWithPath: parent).standardizedFileURL
    func failure(_ folder: String) -> CommandFailure {
        CommandFailure(message: "cannot create the run folder \((parent as NSString).appendingPathComponent(folder)): "
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
        let folder = n == 1 ? name : "\(name)-\(n)"
        let candidate = base.appendingPathComponent(folder)
        if mkdir(candidate.path, 0o755) == 0 { return candidate }
        guard errno == EEXIST else { throw failure(folder) }
        if existOK {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: candidate.path, isDirectory: &isFolder), isFolder.boolValue else {
                errno = ENOTDIR
                throw failure(folder)
            }
            return candidate
        }
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

import ArgumentParser
import Foundation

/// Ultralytics' command-line form (8.4.190 `cfg.entrypoint`), `yolo [task] verb key=value …`,
/// rewritten into this CLI's options before ArgumentParser reads them, so both forms mean the
/// same: `conf=0.5` is `--conf 0.5`, `save_txt=True` or a bare `save_txt` is `--save-txt`,
/// `show_labels=False` is `--hide-labels`, `imgsz=[480,640]` is `--imgsz 480,640`, and
/// `yolo detect predict` is `yolo predict --task detect`. A key is a verb's long option with `_`
/// for `-`, read from ArgumentParser's own description of the verb, so every option has one.
enum UltralyticsArguments {
    /// Ultralytics' task words, accepted before the verb (and as `task=`).
    static let tasks: Set<String> = ["detect", "segment", "pose", "obb", "classify"]

    /// Ultralytics' older spellings of keys (its `_handle_deprecation`), renamed before lookup.
    private static let renamed = ["boxes": "show_boxes", "line_thickness": "line_width"]

    /// `arguments` (without the program name) with every `key=value`, bare boolean key and task
    /// word replaced by the options they stand for; `--options` pass through unchanged.
    /// Throws `ValidationError` naming an unknown key (with the valid ones) or a bad value.
    static func translate(_ arguments: [String], verbs: [ParsableCommand.Type]) throws -> [String] {
        var rest = arguments[...]
        if rest.count == 1, let word = rest.first, ["version", "help"].contains(word) { return ["--" + word] }
        // The leading words: task and verb in any order, as Ultralytics accepts them.
        var task: String?, verbName: String?
        func take(_ word: String) -> Bool {
            let (key, value) = split(word) ?? ("", word)
            if (key.isEmpty || key == "task"), tasks.contains(value), task == nil {
                task = value
            } else if (key.isEmpty || key == "mode"), verbs.contains(where: { $0._commandName == value }), verbName == nil {
                verbName = value
            } else {
                return false
            }
            return true
        }
        while let word = rest.first, take(word) { rest = rest.dropFirst() }
        // Ultralytics also takes `mode=` and `task=` among the other keys.
        rest = rest.filter { !($0.hasPrefix("mode=") || $0.hasPrefix("task=")) || !take($0) }[...]
        guard let verbName else {
            guard task != nil || rest.contains(where: { split($0) != nil }) else { return arguments }
            throw ValidationError("give a verb first: \(verbs.map { $0._commandName }.joined(separator: ", ")), "
                                  + "e.g. yolo predict model=yolo26n.pt source=bus.jpg")
        }
        let verb = verbs.first { $0._commandName == verbName }!
        let names = try ArgumentNames(verb)
        var out = [verbName]
        var positionals = names.positionals
        if let task, names.options.contains("--task") { out += ["--task", task] }
        while let argument = rest.popFirst() {
            if argument == "--" {
                out += [argument] + rest
                break
            }
            if argument.hasPrefix("-") {
                out.append(argument)
                // An option's value is kept as it is, `=` or not.
                if names.options.contains(argument), let value = rest.popFirst() { out.append(value) }
                continue
            }
            guard let (key, value) = split(argument) else {
                // A bare key sets a flag, as `yolo predict save` does in Ultralytics.
                let option = names.long(argument)
                if names.flags.contains(option) {
                    out.append(option)
                    continue
                }
                if names.options.contains(option) {
                    throw ValidationError("'\(argument)' needs a value: \(argument)=…")
                }
                // Else the verb's own positional argument, while it takes one.
                guard positionals > 0 else { throw names.unknown(argument, verb: verbName) }
                positionals -= 1
                out.append(argument)
                continue
            }
            let option = names.long(renamed[key] ?? key)
            if names.flags.contains(option) {
                switch value.lowercased() {
                case "true": out.append(option)
                case "false": out += names.negation(of: option).map { [$0] } ?? []
                default: throw ValidationError("'\(argument)': \(key) is True or False")
                }
            } else if names.options.contains(option) {
                if value.lowercased() == "none" { continue }  // Ultralytics' None: the default
                guard !["true", "false"].contains(value.lowercased()) else {
                    throw ValidationError("'\(argument)': \(key) takes a value here, not True or False (see yolo \(verbName) --help)")
                }
                out += [option, literal(value)]
            } else {
                throw names.unknown(key, verb: verbName)
            }
        }
        return out
    }

    /// `key=value` split at the first `=` when the part before it is a key (letters, digits,
    /// `_`, `-`, starting with a letter), so values such as URLs with queries stay whole.
    private static func split(_ argument: String) -> (key: String, value: String)? {
        guard let equals = argument.firstIndex(of: "="), let first = argument.first, first.isLetter,
              argument[..<equals].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" || $0 == "-" }) else { return nil }
        return (String(argument[..<equals]), String(argument[argument.index(after: equals)...]))
    }

    /// A Python literal as this CLI writes the value: quotes dropped, a list or tuple as
    /// comma-separated items (`[480, 640]` → `480,640`).
    private static func literal(_ value: String) -> String {
        for (open, close) in [("'", "'"), ("\"", "\""), ("[", "]"), ("(", ")")]
        where value.count >= 2 && value.hasPrefix(open) && value.hasSuffix(close) {
            let inner = String(value.dropFirst().dropLast())
            return open == "[" || open == "(" ? inner.filter { $0 != " " } : inner
        }
        return value
    }
}

/// A verb's options (which take a value) and flags, by the names typed (`--save-txt`, `-o`),
/// from ArgumentParser's JSON description of the command (its `--experimental-dump-help`).
private struct ArgumentNames {
    var options = Set<String>(), flags = Set<String>()
    /// How many positional arguments the verb takes (`yolo solutions count`).
    var positionals = 0

    init(_ command: ParsableCommand.Type) throws {
        struct Tool: Decodable {
            struct Command: Decodable { let arguments: [Argument]? }
            struct Argument: Decodable { let kind: String; let names: [Name]? }
            struct Name: Decodable { let kind: String; let name: String }
            let command: Command
        }
        let tool = try JSONDecoder().decode(Tool.self, from: Data(command._dumpHelp().utf8))
        for argument in tool.command.arguments ?? [] {
            if argument.kind == "positional" { positionals += 1 }
            for name in argument.names ?? [] {
                let typed = (name.kind == "short" ? "-" : name.kind == "long" ? "--" : "-") + name.name
                if argument.kind == "option" { options.insert(typed) } else if argument.kind == "flag" { flags.insert(typed) }
            }
        }
    }

    /// The option a key names: `save_txt` → `--save-txt`.
    func long(_ key: String) -> String { "--" + key.replacingOccurrences(of: "_", with: "-") }

    /// The flag meaning the opposite of `flag` (`--hide-labels` for `--show-labels`, `--no-x`
    /// for `--x`, and back), or nil when the flag is simply left out for False.
    func negation(of flag: String) -> String? {
        let name = flag.dropFirst(2)
        let candidates = name.hasPrefix("show-") ? ["--hide-" + name.dropFirst(5)]
            : name.hasPrefix("hide-") ? ["--show-" + name.dropFirst(5)]
            : name.hasPrefix("no-") ? ["--" + name.dropFirst(3)] : ["--no-" + name]
        return candidates.first { flags.contains($0) }
    }

    /// The error for a key the verb does not take, listing those it does.
    func unknown(_ key: String, verb: String) -> ValidationError {
        let keys = (options.union(flags)).filter { $0.hasPrefix("--") && $0 != "--help" }
            .map { $0.dropFirst(2).replacingOccurrences(of: "-", with: "_") }.sorted()
        return ValidationError("'\(key)' is not a valid argument of yolo \(verb); valid: \(keys.joined(separator: ", "))")
    }
}

import CYaml
import Yams

/// The top-level mapping of a YAML configuration file (a data or tracker YAML), composed as
/// Yams' node tree, in which an alias shares its anchor's node instead of copying it.
///
/// A libyaml pass first counts the nodes the document stands for with its aliases expanded and
/// refuses more than `maxNodes`: Yams hashes each mapping key whole while composing, and a
/// reader walks an aliased subtree expanded, so a "billion laughs" document (~500 bytes standing
/// for 10⁹ nodes) would otherwise take hours or all memory.
struct YAMLMapping {
    /// Most nodes a document may stand for, aliases expanded: about what 1 MiB of plain YAML
    /// holds, far above the few thousand of the largest Ultralytics data YAML.
    static let maxNodes = 1_000_000

    /// The keys in document order (a repeated key twice), and the value of each (the last one).
    let keys: [String]
    let values: [String: Node]

    /// Throws the reason the text is no such mapping: a syntax error (with its line), more than
    /// `maxNodes` nodes, not a mapping, or a key that is not a string.
    init(yaml: String) throws(YAMLMappingError) {
        let nodes = Self.expandedNodeCount(yaml, limit: Self.maxNodes)
        guard nodes <= Self.maxNodes else {
            throw YAMLMappingError(reason: "its aliases expand it to more than \(Self.maxNodes) nodes (an alias bomb?)")
        }
        let root: Node?
        do {
            root = try Yams.compose(yaml: yaml)
        } catch {
            throw YAMLMappingError(reason: "\(error)")
        }
        guard let mapping = root?.mapping else {
            throw YAMLMappingError(reason: "the document is not a mapping of keys to values")
        }
        var keys = [String](), values = [String: Node]()
        for (key, value) in mapping {
            guard let name = key.string, key.kind == .str else {
                throw YAMLMappingError(reason: "key \(key.string ?? "?") is not a string")
            }
            keys.append(name)
            values[name] = value
        }
        self.keys = keys
        self.values = values
    }

    /// The nodes of `yaml` with aliases expanded, counted on libyaml's events up to just past
    /// `limit`; what libyaml cannot parse is left to Yams to report.
    private static func expandedNodeCount(_ yaml: String, limit: Int) -> Int {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else { return 0 }
        defer { yaml_parser_delete(&parser) }
        let text = yaml.utf8CString
        return text.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: UInt8.self) { bytes in
                yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count - 1)
                // Each open collection's nodes so far; an anchor's expanded size once it is complete.
                var open = [(anchor: String?, nodes: Int)](), sizes = [String: Int](), total = 0
                func add(_ nodes: Int, anchor: String?) {
                    if let anchor { sizes[anchor] = nodes }
                    if open.isEmpty { total += nodes } else { open[open.count - 1].nodes += nodes }
                }
                func name(_ anchor: UnsafeMutablePointer<UInt8>?) -> String? { anchor.map { String(cString: $0) } }
                var event = yaml_event_t()
                while total <= limit && (open.last?.nodes ?? 0) <= limit {
                    guard yaml_parser_parse(&parser, &event) == 1 else { break }
                    defer { yaml_event_delete(&event) }
                    switch event.type {
                    case YAML_STREAM_END_EVENT: return total
                    case YAML_SCALAR_EVENT: add(1, anchor: name(event.data.scalar.anchor))
                    case YAML_ALIAS_EVENT: add(name(event.data.alias.anchor).flatMap { sizes[$0] } ?? 0, anchor: nil)
                    case YAML_SEQUENCE_START_EVENT: open.append((name(event.data.sequence_start.anchor), 1))
                    case YAML_MAPPING_START_EVENT: open.append((name(event.data.mapping_start.anchor), 1))
                    case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                        guard let done = open.popLast() else { break }
                        add(done.nodes, anchor: done.anchor)
                    default: break
                    }
                }
                return max(total, open.last?.nodes ?? 0)
            }
        }
    }
}

/// Why a YAML text is not a usable mapping; callers wrap the reason in their own error.
struct YAMLMappingError: Error {
    let reason: String
}

extension Node {
    /// The tag the resolver gave the node (int, float, bool, null, str, map, seq).
    var kind: Tag.Name { Tag.Name(rawValue: tag.rawValue) }

    /// An int-tagged scalar's value; nil when it does not fit an `Int` or is written in base 60
    /// (`1:30`), which Yams multiplies out without overflow checks (a trap on a long one).
    var integer: Int? { kind == .int && string?.contains(":") == false ? int : nil }
}

import Foundation

package enum CheckpointError: Error, LocalizedError, Equatable {
    case notACheckpoint(source: String, reason: String)
    case byteOrder(source: String, byteOrder: String)
    case invalid(source: String, what: String, found: String, reason: String)
    case missingStorage(source: String, tensor: String, entry: String)
    case storageTooSmall(source: String, tensor: String, entry: String, needed: Int, size: Int)
    case unsupportedDType(source: String, tensor: String, storage: String)
    case tooDeep(source: String, what: String, limit: Int)
    case tooLarge(source: String, limit: Int)
    case batchNormEps(source: String, values: [Double])

    package var errorDescription: String? {
        switch self {
        case let .notACheckpoint(source, reason):
            "\(source) is not an Ultralytics checkpoint: \(reason)"
        case let .byteOrder(source, byteOrder):
            "\(source) was saved on a '\(byteOrder)'-endian machine; only little-endian checkpoints are read"
        case let .invalid(source, what, found, reason):
            "\(source): the checkpoint's \(what) is \(found), \(reason)"
        case let .missingStorage(source, tensor, entry):
            "\(source): tensor '\(tensor)' lives in storage '\(entry)', which the archive does not have"
        case let .storageTooSmall(source, tensor, entry, needed, size):
            "\(source): tensor '\(tensor)' needs \(needed) bytes of storage '\(entry)', which holds \(size)"
        case let .unsupportedDType(source, tensor, storage):
            "\(source): tensor '\(tensor)' is stored as torch.\(storage); supported are Half, Float and BFloat16"
        case let .tooDeep(source, what, limit):
            "\(source): the checkpoint's \(what) nests more than \(limit) levels deep (a cycle?)"
        case let .tooLarge(source, limit):
            "\(source): reading the checkpoint's model takes more than \(limit) steps (shared objects repeated "
                + "exponentially?)"
        case let .batchNormEps(source, values):
            "\(source): the BatchNorm layers use different epsilons \(values); the format records only one"
        }
    }
}

/// An Ultralytics `.pt` checkpoint read without Python: PyTorch's zip archive and a restricted
/// pickle, from which the model (`ema`, else `model`, as Ultralytics prefers) gives the same
/// metadata and tensors as a `yolo-safetensors/1` file: the architecture dict, names, stride,
/// task, image size, `end2end`, `kpt_shape`, `bn_eps` and the `state_dict` by name.
package struct Checkpoint {
    /// Module nesting and JSON depth far beyond Ultralytics' (module depth ~6, yaml depth 4).
    static let maxDepth = 64
    /// Objects visited and entries scanned while reading the model: a checkpoint needs ~10⁵.
    static let maxSteps = 2_000_000

    private let pickle: Pickle
    private let source: String
    private let data: Data
    /// The archive's entries and the `<name>/` prefix of this checkpoint's.
    private let archive: ZipArchive
    private let prefix: String
    private var steps = 0

    /// The checkpoint's model as a weight file. Contiguous tensors are read in place from
    /// `data`; the others are copied after it.
    package static func weights(data: Data, source: String) throws -> SafeTensorsFile {
        let archive = try ZipArchive(data: data, source: source)
        let pickles = archive.entries.keys.filter { $0.hasSuffix("/data.pkl") && $0.split(separator: "/").count == 2 }
        guard pickles.count == 1, let pickleName = pickles.first, let pickleRange = archive.entries[pickleName] else {
            throw CheckpointError.notACheckpoint(
                source: source, reason: "the zip archive has \(pickles.count) '<name>/data.pkl' entries, not one")
        }
        let prefix = String(pickleName.dropLast("data.pkl".count))
        if let range = archive.entries[prefix + "byteorder"] {
            let order = String(decoding: data[data.startIndex + range.lowerBound ..< data.startIndex + range.upperBound],
                               as: UTF8.self)
            guard order == "little" else { throw CheckpointError.byteOrder(source: source, byteOrder: String(order.prefix(20))) }
        }
        let pickle = try Pickle(data: data[data.startIndex + pickleRange.lowerBound ..< data.startIndex + pickleRange.upperBound])
        var checkpoint = Checkpoint(pickle: pickle, source: source, data: data, archive: archive, prefix: prefix)
        let (metadata, tensors) = try checkpoint.read(fileName: URL(fileURLWithPath: source).lastPathComponent)

        var entries: [String: SafeTensorsFile.Entry] = [:]
        var copies = Data()
        for (name, tensor) in tensors {
            guard let dtype = tensor.storage.dtype else {
                throw CheckpointError.unsupportedDType(source: source, tensor: name, storage: tensor.storage.type)
            }
            let storage = try checkpoint.storageStart(tensor, name: name)
            let byteCount = tensor.shape.reduce(1, *) * dtype.byteSize
            if tensor.isContiguous {
                let start = storage + tensor.offset * dtype.byteSize
                entries[name] = .init(dtype: dtype, shape: tensor.shape, range: start ..< start + byteCount)
            } else {
                // A weight never repeats elements: a larger view is not a weight and would be an
                // unbounded copy.
                guard byteCount <= tensor.storage.count * dtype.byteSize else {
                    throw CheckpointError.invalid(source: source, what: "tensor '\(name)'",
                                                  found: "a view of shape \(tensor.shape), stride \(tensor.strides)",
                                                  reason: "larger than its \(tensor.storage.count)-element storage")
                }
                let start = data.count + copies.count
                copies.append(Self.gather(tensor, from: data, at: storage))
                entries[name] = .init(dtype: dtype, shape: tensor.shape, range: start ..< start + byteCount)
            }
        }
        return try SafeTensorsFile(metadata: metadata, entries: entries, data: copies.isEmpty ? data : data + copies,
                                   source: source)
    }

    /// Where a tensor's storage starts in the data, checked to be in the archive and to hold
    /// every element of the storage.
    private func storageStart(_ tensor: PickleTensor, name: String) throws -> Int {
        let entryName = prefix + "data/" + tensor.storage.key
        guard let range = archive.entries[entryName] else {
            throw CheckpointError.missingStorage(source: source, tensor: name, entry: entryName)
        }
        let needed = tensor.storage.count * tensor.storage.elementSize
        guard needed <= range.count else {
            throw CheckpointError.storageTooSmall(source: source, tensor: name, entry: entryName, needed: needed,
                                                  size: range.count)
        }
        return range.lowerBound
    }

    /// The elements of a view in row-major order (its extent was checked against the storage).
    static func gather(_ tensor: PickleTensor, from data: Data, at start: Int) -> Data {
        let size = tensor.storage.elementSize
        let count = tensor.shape.reduce(1, *)
        var out = Data(count: count * size)
        guard count > 0 else { return out }
        var index = [Int](repeating: 0, count: tensor.shape.count)
        data.withUnsafeBytes { source in
            out.withUnsafeMutableBytes { destination in
                var element = tensor.offset
                for i in 0 ..< count {
                    let from = source.baseAddress! + start + element * size
                    (destination.baseAddress! + i * size).copyMemory(from: from, byteCount: size)
                    // Advance the index like an odometer, the last dimension fastest.
                    for d in stride(from: index.count - 1, through: 0, by: -1) {
                        index[d] += 1
                        element += tensor.strides[d]
                        if index[d] < tensor.shape[d] { break }
                        element -= tensor.strides[d] * index[d]
                        index[d] = 0
                    }
                }
            }
        }
        return out
    }

    // MARK: The model

    private mutating func read(fileName: String) throws -> ([String: String], [String: PickleTensor]) {
        let root = pickle.root
        let model: PickleValue
        if isInstance(root) {
            model = root
        } else {
            guard pickle[root]?.kind == .dict else {
                throw CheckpointError.notACheckpoint(source: source, reason: "its pickle holds \(pickle.describe(root)), not a dict")
            }
            let ema = try lookup(root, "ema")
            guard let chosen = [ema, try lookup(root, "model")].compactMap({ $0 }).first(where: isInstance) else {
                throw CheckpointError.notACheckpoint(source: source, reason: "the checkpoint has neither 'ema' nor 'model'")
            }
            model = chosen
        }

        guard let yaml = try attribute(model, "yaml"), pickle[yaml]?.kind == .dict else {
            throw CheckpointError.notACheckpoint(source: source, reason: "the model has no 'yaml' architecture dict")
        }
        var extra: [(String, String)] = []
        if try lookup(yaml, "scale") == nil, let scales = try lookup(yaml, "scales"),
           let first = pickle[scales]?.entries.first, case .string(let firstScale) = first.key {
            var scale = firstScale
            if case .string(let file)? = try lookup(yaml, "yaml_file"),
               let match = file.firstMatch(of: /yolo(e-)?v?\d+([nslmx])/.ignoresCase()) {
                scale = String(match.output.2).lowercased()
            }
            extra.append(("scale", Self.quoted(scale)))
        }
        var metadata = ["format": "yolo-safetensors/1", "arch": try json(yaml, depth: 0, extra: extra), "source": fileName]

        let trainArgs = try lookup(pickle.root, "train_args") ?? attribute(model, "args")
        var task = try attribute(model, "task")
        if task == nil || task == PickleValue.none { task = try trainArgs.flatMap { try lookup($0, "task") } }
        if case .string(let name)? = task {
            metadata["task"] = name
        } else {
            metadata["task"] = try guessTask(yaml)
        }
        metadata["names"] = try names(try attribute(model, "names"))
        if let stride = try attribute(model, "stride") {
            metadata["stride"] = try strides(stride)
        }
        if let size = try trainArgs.flatMap({ try lookup($0, "imgsz") }), size != .none {
            metadata["imgsz"] = try json(size, depth: 0)
        }
        let head = try lastModule(model)
        if let head {
            metadata["end2end"] = try attribute(head, "one2one_cv2").map { $0 != .none } == true ? "true" : "false"
        }
        if metadata["task"] == "pose" {
            for owner in [model, head, yaml].compactMap({ $0 }) {
                if let shape = try attribute(owner, "kpt_shape"), shape != .none {
                    metadata["kpt_shape"] = try json(shape, depth: 0)
                    break
                }
            }
        }
        for key in ["version", "date", "license"] {
            if case .string(let text)? = try lookup(pickle.root, key) {
                metadata[key == "version" ? "ultralytics_version" : key] = text
            }
        }

        var tensors: [String: PickleTensor] = [:]
        var epsilons = Set<Double>()
        try stateDict(model, prefix: "", depth: 0, into: &tensors, epsilons: &epsilons)
        guard epsilons.count <= 1 else { throw CheckpointError.batchNormEps(source: source, values: epsilons.sorted()) }
        if let eps = epsilons.first { metadata["bn_eps"] = "\(eps)" }
        return (metadata, tensors)
    }

    /// `state_dict()`: each module's parameters, then its persistent buffers, then its children,
    /// named by their path; `num_batches_tracked` is left out as the format does. The BatchNorm
    /// layers with tensors give their epsilons.
    private mutating func stateDict(_ module: PickleValue, prefix: String, depth: Int,
                                    into tensors: inout [String: PickleTensor], epsilons: inout Set<Double>) throws {
        guard depth <= Self.maxDepth else { throw CheckpointError.tooDeep(source: source, what: "module tree", limit: Self.maxDepth) }
        guard let state = try moduleState(module) else {
            throw CheckpointError.invalid(source: source, what: "module '\(prefix)'", found: pickle.describe(module),
                                          reason: "not a torch module")
        }
        let skipped = try lookup(state, "_non_persistent_buffers_set").flatMap { pickle[$0]?.items } ?? []
        var count = 0
        for field in ["_parameters", "_buffers"] {
            for (key, value) in try entries(try lookup(state, field), of: "'\(prefix)\(field)'") {
                guard case .string(let name) = key else {
                    throw CheckpointError.invalid(source: source, what: "'\(prefix)\(field)'", found: pickle.describe(key),
                                                  reason: "not a name")
                }
                guard value != .none, name != "num_batches_tracked", !skipped.contains(key) else { continue }
                guard case .tensor(let tensor)? = pickle[value]?.kind else {
                    throw CheckpointError.invalid(source: source, what: "tensor '\(prefix + name)'",
                                                  found: pickle.describe(value), reason: "not a tensor")
                }
                tensors[prefix + name] = tensor
                count += 1
            }
        }
        if count > 0, case .instance(let type)? = pickle[module]?.kind,
           case .global(_, let className)? = pickle[type]?.kind, className.hasPrefix("BatchNorm") {
            guard let eps = try lookup(state, "eps"), let value = Self.number(eps) else {
                throw CheckpointError.invalid(source: source, what: "BatchNorm '\(prefix.dropLast())'",
                                              found: "without an eps", reason: "which folding needs")
            }
            epsilons.insert(value)
        }
        for (key, child) in try entries(try lookup(state, "_modules"), of: "'\(prefix)_modules'") where child != .none {
            guard case .string(let name) = key else {
                throw CheckpointError.invalid(source: source, what: "'\(prefix)_modules'", found: pickle.describe(key),
                                              reason: "not a name")
            }
            try stateDict(child, prefix: prefix + name + ".", depth: depth + 1, into: &tensors, epsilons: &epsilons)
        }
    }

    /// The head: the last module of the model's `model` sequence.
    private mutating func lastModule(_ model: PickleValue) throws -> PickleValue? {
        guard let sequence = try attribute(model, "model"), let state = try moduleState(sequence) else { return nil }
        return try entries(try lookup(state, "_modules"), of: "model sequence").last?.value
    }

    private mutating func guessTask(_ yaml: PickleValue) throws -> String {
        // Ultralytics' guess_model_task: the module name of the yaml's last head row.
        guard let head = pickle[try lookup(yaml, "head") ?? .none], let row = pickle[head.items.last ?? .none],
              row.items.count >= 2, case .string(let module) = row.items[row.items.count - 2] else {
            return "detect"
        }
        let name = module.lowercased()
        if ["classify", "classifier", "cls", "fc"].contains(name) { return "classify" }
        return ["segment", "pose", "obb"].first { name.contains($0) } ?? "detect"
    }

    private mutating func names(_ value: PickleValue?) throws -> String? {
        guard let value, value != .none else { return nil }
        guard let object = pickle[value], [.dict, .list, .tuple].contains(object.kind) else {
            throw CheckpointError.invalid(source: source, what: "'names'", found: pickle.describe(value),
                                          reason: "not a dict or list of class names")
        }
        let pairs: [(PickleValue, PickleValue)] = object.kind == .dict
            ? try entries(value, of: "'names'") : object.items.enumerated().map { (.int($0.offset), $0.element) }
        var fields: [String] = []
        for (key, name) in pairs {
            steps += 1
            guard case .int(let index) = key, case .string(let text) = name else {
                throw CheckpointError.invalid(source: source, what: "'names' entry", found: pickle.describe(key) + ": "
                                              + pickle.describe(name), reason: "not an index and a name")
            }
            fields.append("\(Self.quoted(String(index))): \(Self.quoted(text))")
        }
        return "{" + fields.joined(separator: ", ") + "}"
    }

    private func strides(_ value: PickleValue) throws -> String {
        var values: [Double] = []
        if case .tensor(let tensor)? = pickle[value]?.kind, tensor.shape.count <= 1, tensor.shape.reduce(1, *) <= 16 {
            values = tensor.shape.reduce(1, *) == 0 ? [] : try strideValues(tensor)
        } else if let list = pickle[value], [.list, .tuple].contains(list.kind), list.items.count <= 16 {
            values = list.items.compactMap(Self.number)
        }
        guard !values.isEmpty, values.allSatisfy({ $0.isFinite && $0 >= 1 && $0 <= 4096 }) else {
            throw CheckpointError.invalid(source: source, what: "'stride'", found: pickle.describe(value),
                                          reason: "not a list of strides in 1...4096")
        }
        return "[" + values.map { "\(Int($0.rounded()))" }.joined(separator: ", ") + "]"
    }

    /// The values of the model's stride tensor, read from its storage.
    private func strideValues(_ tensor: PickleTensor) throws -> [Double] {
        guard let dtype = tensor.storage.dtype else {
            throw CheckpointError.unsupportedDType(source: source, tensor: "stride", storage: tensor.storage.type)
        }
        let bytes = Self.gather(tensor, from: data, at: try storageStart(tensor, name: "stride"))
        return bytes.withUnsafeBytes { raw in
            (0 ..< tensor.shape.reduce(1, *)).map { i in
                func bits<T: FixedWidthInteger>(_: T.Type) -> T {
                    T(littleEndian: raw.loadUnaligned(fromByteOffset: i * MemoryLayout<T>.size, as: T.self))
                }
                switch dtype {
                case .f32: return Double(Float(bitPattern: bits(UInt32.self)))
                case .f16: return Double(Float(Float16(bitPattern: bits(UInt16.self))))
                case .bf16: return Double(Float(bitPattern: UInt32(bits(UInt16.self)) << 16))
                }
            }
        }
    }

    // MARK: Pickle values

    private func isInstance(_ value: PickleValue) -> Bool {
        if case .instance? = pickle[value]?.kind { return true }
        return false
    }

    private static func number(_ value: PickleValue) -> Double? {
        switch value {
        case .int(let i): Double(i)
        case .float(let f): f
        default: nil
        }
    }

    /// A dict's entries (an instance's when it was given some), counted against the step budget.
    private mutating func entries(_ value: PickleValue?, of what: String) throws -> [(key: PickleValue, value: PickleValue)] {
        guard let value, value != .none else { return [] }
        guard let object = pickle[value], object.kind == .dict || isInstance(value) else {
            throw CheckpointError.invalid(source: source, what: what, found: pickle.describe(value), reason: "not a dict")
        }
        steps += object.entries.count + 1
        guard steps <= Self.maxSteps else { throw CheckpointError.tooLarge(source: source, limit: Self.maxSteps) }
        return object.entries
    }

    /// `value[key]` for a dict, or an instance's state entry `key` (`vars(obj)[key]`).
    private mutating func lookup(_ value: PickleValue, _ key: String) throws -> PickleValue? {
        guard let object = pickle[value] else { return nil }
        let dict = object.kind == .dict ? value : object.state.flatMap(instanceDict)
        guard let dict else { return nil }
        return try entries(dict, of: "dict").last(where: { $0.key == .string(key) })?.value
    }

    /// An instance's `__dict__`: its BUILD state, or the first of a `(dict, slots)` state.
    private func instanceDict(_ state: PickleValue) -> PickleValue? {
        guard let object = pickle[state] else { return nil }
        if object.kind == .dict { return state }
        if object.kind == .tuple, let first = object.items.first, pickle[first]?.kind == .dict { return first }
        return nil
    }

    /// The dict holding a torch module's state (`_parameters`, `_buffers`, `_modules`, …).
    private mutating func moduleState(_ module: PickleValue) throws -> PickleValue? {
        guard isInstance(module), let state = pickle[module]?.state.flatMap(instanceDict) else { return nil }
        return state
    }

    /// `getattr(obj, name)` as torch modules answer it: the instance's own attribute, else a
    /// parameter, buffer or child module of that name. Dicts answer by key.
    private mutating func attribute(_ value: PickleValue, _ name: String) throws -> PickleValue? {
        if let found = try lookup(value, name) { return found }
        guard isInstance(value), let state = try moduleState(value) else { return nil }
        for field in ["_parameters", "_buffers", "_modules"] {
            if let table = try lookup(state, field), let found = try lookup(table, name) { return found }
        }
        return nil
    }

    /// JSON for the architecture dict and other plain values: None, bools, numbers, strings, lists,
    /// tuples and dicts, nested at most `maxDepth` deep.
    private mutating func json(_ value: PickleValue, depth: Int, extra: [(String, String)] = []) throws -> String {
        guard depth <= Self.maxDepth else { throw CheckpointError.tooDeep(source: source, what: "architecture dict", limit: Self.maxDepth) }
        steps += 1
        guard steps <= Self.maxSteps else { throw CheckpointError.tooLarge(source: source, limit: Self.maxSteps) }
        switch value {
        case .none: return "null"
        case .bool(let b): return b ? "true" : "false"
        case .int(let i): return "\(i)"
        case .float(let f) where f.isFinite: return "\(f)"
        case .string(let s): return Self.quoted(s)
        case .object(let index) where [.list, .tuple].contains(pickle.objects[index].kind):
            return try "[" + pickle.objects[index].items.map { try json($0, depth: depth + 1) }.joined(separator: ", ") + "]"
        case .object(let index) where pickle.objects[index].kind == .dict:
            var fields: [String] = []
            for (key, item) in try entries(value, of: "architecture dict") {
                let name: String
                switch key {
                case .string(let s): name = s
                case .int(let i): name = "\(i)"
                default:
                    throw CheckpointError.invalid(source: source, what: "architecture dict key", found: pickle.describe(key),
                                                  reason: "not a str or int")
                }
                fields.append(Self.quoted(name) + ": " + (try json(item, depth: depth + 1)))
            }
            return "{" + (fields + extra.map { Self.quoted($0.0) + ": " + $0.1 }).joined(separator: ", ") + "}"
        default:
            throw CheckpointError.invalid(source: source, what: "architecture dict", found: "a value " + pickle.describe(value),
                                          reason: "not representable in JSON")
        }
    }

    private static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case _ where scalar.value < 0x20: out += String(format: "\\u%04x", scalar.value)
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

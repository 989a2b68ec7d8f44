import Foundation

package enum PickleError: Error, LocalizedError, Equatable {
    case truncated(opcode: String, offset: Int)
    case unsupportedOpcode(opcode: UInt8, offset: Int)
    case stackUnderflow(opcode: String, offset: Int)
    case noMark(opcode: String, offset: Int)
    case wrongOperand(opcode: String, offset: Int, expected: String, found: String)
    case missingMemo(index: Int, offset: Int)
    case limitExceeded(what: String, limit: Int, offset: Int)
    case invalidCall(function: String, offset: Int, reason: String)
    case notAStorage(persistentID: String, offset: Int)
    case noStop(length: Int)

    package var errorDescription: String? {
        switch self {
        case let .truncated(opcode, offset):
            "pickle opcode \(opcode) at offset \(offset) runs past the end of the data"
        case let .unsupportedOpcode(opcode, offset):
            "pickle opcode 0x\(String(opcode, radix: 16)) at offset \(offset) is not one of the protocol 2–5 "
                + "opcodes a checkpoint uses (or not an opcode)"
        case let .stackUnderflow(opcode, offset):
            "pickle opcode \(opcode) at offset \(offset) needs more values than the stack holds"
        case let .noMark(opcode, offset):
            "pickle opcode \(opcode) at offset \(offset) has no MARK to close"
        case let .wrongOperand(opcode, offset, expected, found):
            "pickle opcode \(opcode) at offset \(offset) needs \(expected), found \(found)"
        case let .missingMemo(index, offset):
            "pickle memo slot \(index), read at offset \(offset), was never written"
        case let .limitExceeded(what, limit, offset):
            "pickle has more than \(limit) \(what) (at offset \(offset)); not a checkpoint this reader accepts"
        case let .invalidCall(function, offset, reason):
            "pickle calls \(function) at offset \(offset) with \(reason)"
        case let .notAStorage(persistentID, offset):
            "pickle persistent id at offset \(offset) is \(persistentID), not a ('storage', torch.*Storage, "
                + "key, location, count) tuple"
        case let .noStop(length):
            "pickle of \(length) bytes ends without a STOP opcode"
        }
    }
}

/// A value of the restricted pickle machine. Containers and objects live in `Pickle.objects`
/// and are referred to by index, so shared and cyclic structures need no reference counting and
/// nothing in the machine recurses.
package enum PickleValue: Sendable, Equatable {
    case none
    case bool(Bool)
    case int(Int)
    /// An integer beyond 64 bits; kept only as a placeholder.
    case largeInteger
    case float(Double)
    case string(String)
    case bytes([UInt8])
    case object(Int)
}

/// A torch storage named by a persistent id: the zip entry `data/<key>` holding `count` elements.
package struct PickleStorage: Sendable, Equatable {
    /// The storage class, e.g. `HalfStorage`.
    package let type: String
    package let dtype: SafeTensorsFile.DType?
    package let elementSize: Int
    package let key: String
    package let count: Int
}

/// A tensor view of a storage (`torch._utils._rebuild_tensor_v2`), its extent checked against the storage.
package struct PickleTensor: Sendable, Equatable {
    package let storage: PickleStorage
    package let offset: Int
    package let shape: [Int]
    package let strides: [Int]

    /// Whether the elements lie in row-major order with no gaps.
    package var isContiguous: Bool {
        var expected = 1
        for (size, stride) in zip(shape, strides).reversed() where size != 1 {
            guard stride == expected else { return false }
            expected *= size
        }
        return true
    }
}

/// An object of the pickle machine. Only an allow-list of globals is interpreted; an instance of
/// any other class, and the result of calling anything else, is an inert record of the class,
/// the arguments and the state the pickle gave it.
package struct PickleObject: Sendable {
    package enum Kind: Sendable, Equatable {
        case tuple, list, dict, set
        case global(module: String, name: String)
        /// A call of `callable` (REDUCE, NEWOBJ) that was recorded, not made.
        case instance(callable: PickleValue)
        case storage(PickleStorage)
        case tensor(PickleTensor)
    }

    package var kind: Kind
    /// Tuple, list and set elements; an instance's arguments followed by what was appended to it.
    package var items: [PickleValue] = []
    /// Dictionary entries, or those set on an instance, in pickle order (a later key wins).
    package var entries: [(key: PickleValue, value: PickleValue)] = []
    /// An instance's BUILD state.
    package var state: PickleValue?
}

/// A pickle interpreter that never executes code: protocol 2–5 opcodes over a flat arena of objects.
package struct Pickle: Sendable {
    package private(set) var objects: [PickleObject] = []
    /// The value STOP returned.
    package private(set) var root: PickleValue = .none

    /// Bounds on what a pickle may build, far above a checkpoint's (yolo26n: ~12,000 objects).
    static let maxObjects = 4_000_000
    static let maxStack = 1_000_000

    package init(data: Data) throws {
        try run([UInt8](data))
    }

    package subscript(value: PickleValue) -> PickleObject? {
        if case .object(let index) = value { return objects[index] }
        return nil
    }

    /// A short description of a value for error messages.
    package func describe(_ value: PickleValue) -> String {
        switch value {
        case .none: "None"
        case .bool(let b): "bool \(b ? "True" : "False")"
        case .int(let i): "int \(i)"
        case .largeInteger: "a large int"
        case .float(let f): "float \(f)"
        case .string(let s): "str '\(s.prefix(60))'"
        case .bytes(let b): "\(b.count) bytes"
        case .object(let index):
            switch objects[index].kind {
            case .tuple: "a tuple of \(objects[index].items.count)"
            case .list: "a list of \(objects[index].items.count)"
            case .dict: "a dict of \(objects[index].entries.count)"
            case .set: "a set"
            case .global(let module, let name): "global \(module).\(name)"
            case .instance(let callable): "an instance of \(describe(callable))"
            case .storage(let storage): "torch.\(storage.type) '\(storage.key)'"
            case .tensor(let tensor): "a tensor of shape \(tensor.shape)"
            }
        }
    }

    private mutating func make(_ kind: PickleObject.Kind, items: [PickleValue] = [], offset: Int) throws -> PickleValue {
        guard objects.count < Self.maxObjects else {
            throw PickleError.limitExceeded(what: "objects", limit: Self.maxObjects, offset: offset)
        }
        objects.append(PickleObject(kind: kind, items: items))
        return .object(objects.count - 1)
    }

    private mutating func run(_ bytes: [UInt8]) throws {
        var stack: [PickleValue] = []
        var marks: [Int] = []
        var memo: [Int: PickleValue] = [:]
        var position = 0

        for _ in 0 ... bytes.count {
            guard position < bytes.count else { break }
            let offset = position
            let opcode = bytes[position]
            position += 1
            var name: String { Self.opcodeNames[opcode] ?? "0x\(String(opcode, radix: 16))" }

            func take(_ count: Int) throws -> ArraySlice<UInt8> {
                guard count >= 0, count <= bytes.count - position else {
                    throw PickleError.truncated(opcode: name, offset: offset)
                }
                defer { position += count }
                return bytes[position ..< position + count]
            }
            func unsigned(_ count: Int) throws -> Int {
                try take(count).reversed().reduce(0) { $0 << 8 | Int($1) }
            }
            func length(_ count: Int) throws -> Int {
                let value = try take(count).reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                guard value <= UInt64(bytes.count - position) else {
                    throw PickleError.truncated(opcode: name, offset: offset)
                }
                return Int(value)
            }
            func line() throws -> String {
                guard let end = bytes[position...].firstIndex(of: 0x0A) else {
                    throw PickleError.truncated(opcode: name, offset: offset)
                }
                defer { position = end + 1 }
                return String(decoding: bytes[position ..< end], as: UTF8.self)
            }
            func push(_ value: PickleValue) throws {
                guard stack.count < Self.maxStack else {
                    throw PickleError.limitExceeded(what: "values on the stack", limit: Self.maxStack, offset: offset)
                }
                stack.append(value)
            }
            // Values below the innermost MARK belong to the enclosing frame, as in Python's metastack.
            func pop() throws -> PickleValue {
                guard stack.count > marks.last ?? 0, let value = stack.popLast() else {
                    throw PickleError.stackUnderflow(opcode: name, offset: offset)
                }
                return value
            }
            func popMark() throws -> [PickleValue] {
                guard let mark = marks.popLast() else { throw PickleError.noMark(opcode: name, offset: offset) }
                defer { stack.removeSubrange(mark...) }
                return Array(stack[mark...])
            }
            func top() throws -> Int {
                guard let value = stack.last else { throw PickleError.stackUnderflow(opcode: name, offset: offset) }
                guard case .object(let index) = value else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "an object", found: describe(value))
                }
                return index
            }
            func string(_ value: PickleValue) throws -> String {
                guard case .string(let s) = value else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "a str", found: describe(value))
                }
                return s
            }
            func tupleItems(_ value: PickleValue) throws -> [PickleValue] {
                guard let object = self[value], object.kind == .tuple else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "a tuple", found: describe(value))
                }
                return object.items
            }
            func setItems(_ pairs: [PickleValue]) throws {
                guard pairs.count.isMultiple(of: 2) else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "key–value pairs",
                                                   found: "\(pairs.count) values")
                }
                let index = try top()
                guard objects[index].kind == .dict || isInstance(index) else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "a dict",
                                                   found: describe(.object(index)))
                }
                for i in stride(from: 0, to: pairs.count, by: 2) {
                    objects[index].entries.append((pairs[i], pairs[i + 1]))
                }
            }
            func append(_ values: [PickleValue], to kinds: [PickleObject.Kind]) throws {
                let index = try top()
                guard kinds.contains(objects[index].kind) || isInstance(index) else {
                    throw PickleError.wrongOperand(opcode: name, offset: offset, expected: "a list or set",
                                                   found: describe(.object(index)))
                }
                objects[index].items.append(contentsOf: values)
            }
            func memoize(_ index: Int) throws {
                guard let value = stack.last else { throw PickleError.stackUnderflow(opcode: name, offset: offset) }
                guard memo.count < Self.maxObjects || memo[index] != nil else {
                    throw PickleError.limitExceeded(what: "memo entries", limit: Self.maxObjects, offset: offset)
                }
                memo[index] = value
            }
            func recall(_ index: Int) throws {
                guard let value = memo[index] else { throw PickleError.missingMemo(index: index, offset: offset) }
                try push(value)
            }
            func call(_ callable: PickleValue, _ arguments: [PickleValue]) throws -> PickleValue {
                try self.call(callable, arguments, name: name, offset: offset)
            }

            switch opcode {
            case 0x80: _ = try take(1)  // PROTO
            case 0x95: _ = try take(8)  // FRAME: a length hint
            case 0x2E:  // STOP
                root = try pop()
                return
            case 0x28:  // MARK
                guard marks.count < Self.maxStack else {
                    throw PickleError.limitExceeded(what: "marks", limit: Self.maxStack, offset: offset)
                }
                marks.append(stack.count)
            case 0x30: _ = try pop()  // POP
            case 0x31: _ = try popMark()  // POP_MARK
            case 0x32:  // DUP
                guard let value = stack.last else { throw PickleError.stackUnderflow(opcode: name, offset: offset) }
                try push(value)
            case 0x4E: try push(.none)
            case 0x88: try push(.bool(true))
            case 0x89: try push(.bool(false))
            case 0x4A: try push(.int(Int(Int32(truncatingIfNeeded: try unsigned(4)))))  // BININT
            case 0x4B: try push(.int(try unsigned(1)))  // BININT1
            case 0x4D: try push(.int(try unsigned(2)))  // BININT2
            case 0x8A, 0x8B:  // LONG1, LONG4: little-endian two's complement
                let digits = try take(try length(opcode == 0x8A ? 1 : 4))
                if digits.count <= 8 {
                    let raw = digits.reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
                    let shift = UInt64(64 - 8 * digits.count)
                    try push(.int(digits.isEmpty ? 0 : Int(Int64(bitPattern: raw << shift) >> Int64(shift))))
                } else {
                    try push(.largeInteger)
                }
            case 0x47:  // BINFLOAT, big-endian
                try push(.float(Double(bitPattern: try take(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })))
            case 0x58, 0x8C, 0x8D:  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
                let count = try length(opcode == 0x8C ? 1 : opcode == 0x58 ? 4 : 8)
                try push(.string(String(decoding: try take(count), as: UTF8.self)))
            case 0x54, 0x55, 0x42, 0x43, 0x8E, 0x96:  // BINSTRING, SHORT_BINSTRING, BINBYTES, SHORT_BINBYTES, BINBYTES8, BYTEARRAY8
                let width = [0x55: 1, 0x43: 1, 0x54: 4, 0x42: 4][opcode] ?? 8
                try push(.bytes(Array(try take(try length(width)))))
            case 0x29: try push(try make(.tuple, offset: offset))  // EMPTY_TUPLE
            case 0x74: try push(try make(.tuple, items: try popMark(), offset: offset))  // TUPLE
            case 0x85, 0x86, 0x87:  // TUPLE1, TUPLE2, TUPLE3
                let count = Int(opcode) - 0x84
                guard stack.count - (marks.last ?? 0) >= count else {
                    throw PickleError.stackUnderflow(opcode: name, offset: offset)
                }
                let items = Array(stack.suffix(count))
                stack.removeLast(count)
                try push(try make(.tuple, items: items, offset: offset))
            case 0x5D: try push(try make(.list, offset: offset))  // EMPTY_LIST
            case 0x6C: try push(try make(.list, items: try popMark(), offset: offset))  // LIST
            case 0x61: try append([try pop()], to: [.list])  // APPEND
            case 0x65: try append(try popMark(), to: [.list])  // APPENDS
            case 0x7D: try push(try make(.dict, offset: offset))  // EMPTY_DICT
            case 0x64:  // DICT
                let pairs = try popMark()
                try push(try make(.dict, offset: offset))
                try setItems(pairs)
            case 0x73:  // SETITEM
                let value = try pop()
                try setItems([try pop(), value])
            case 0x75: try setItems(try popMark())  // SETITEMS
            case 0x8F: try push(try make(.set, offset: offset))  // EMPTY_SET
            case 0x90: try append(try popMark(), to: [.set])  // ADDITEMS
            case 0x91: try push(try make(.set, items: try popMark(), offset: offset))  // FROZENSET
            case 0x63:  // GLOBAL
                let module = try line()
                try push(try make(.global(module: Self.python3(module), name: try line()), offset: offset))
            case 0x93:  // STACK_GLOBAL
                let global = try string(try pop())
                try push(try make(.global(module: Self.python3(try string(try pop())), name: global), offset: offset))
            case 0x52:  // REDUCE
                let arguments = try tupleItems(try pop())
                try push(try call(try pop(), arguments))
            case 0x81:  // NEWOBJ
                let arguments = try tupleItems(try pop())
                try push(try call(try pop(), arguments))
            case 0x92:  // NEWOBJ_EX: the keyword arguments are dropped with the call
                _ = try pop()
                let arguments = try tupleItems(try pop())
                try push(try call(try pop(), arguments))
            case 0x62:  // BUILD
                let state = try pop()
                let index = try top()
                if isInstance(index) { objects[index].state = state }
            case 0x51:  // BINPERSID
                try push(try persistentLoad(try pop(), offset: offset))
            case 0x71: try memoize(try unsigned(1))  // BINPUT
            case 0x72: try memoize(try unsigned(4))  // LONG_BINPUT
            case 0x94: try memoize(memo.count)  // MEMOIZE
            case 0x68: try recall(try unsigned(1))  // BINGET
            case 0x6A: try recall(try unsigned(4))  // LONG_BINGET
            default:
                throw PickleError.unsupportedOpcode(opcode: opcode, offset: offset)
            }
        }
        throw PickleError.noStop(length: bytes.count)
    }

    private func isInstance(_ index: Int) -> Bool {
        if case .instance = objects[index].kind { return true }
        return false
    }

    /// Protocol 2 pickles name Python 3's `builtins` by its Python 2 name.
    private static func python3(_ module: String) -> String { module == "__builtin__" ? "builtins" : module }

    /// The allow-listed callables, interpreted; any other call becomes an inert instance record.
    private mutating func call(_ callable: PickleValue, _ arguments: [PickleValue], name: String, offset: Int) throws
        -> PickleValue {
        guard let object = self[callable], case let .global(module, function) = object.kind else {
            return try make(.instance(callable: callable), items: arguments, offset: offset)
        }
        let qualified = "\(module).\(function)"
        func invalid(_ reason: String) -> PickleError {
            .invalidCall(function: qualified, offset: offset, reason: reason)
        }
        switch qualified {
        case "collections.OrderedDict", "builtins.dict":
            guard arguments.isEmpty else { throw invalid("\(arguments.count) arguments; checkpoints pass none") }
            return try make(.dict, offset: offset)
        case "builtins.set", "builtins.frozenset":
            guard arguments.count <= 1 else { throw invalid("\(arguments.count) arguments") }
            guard let first = arguments.first else { return try make(.set, offset: offset) }
            guard let source = self[first], [.list, .tuple, .set].contains(source.kind) else {
                throw invalid("\(describe(first)), not a list")
            }
            return try make(.set, items: source.items, offset: offset)
        case "torch.Size":
            guard arguments.count == 1, let sizes = self[arguments[0]], sizes.kind == .tuple else {
                throw invalid("arguments other than one tuple")
            }
            return try make(.tuple, items: sizes.items, offset: offset)
        case "torch._utils._rebuild_parameter", "torch._utils._rebuild_parameter_with_state":
            guard let data = arguments.first, case .tensor? = self[data]?.kind else {
                throw invalid("\(arguments.first.map(describe) ?? "no arguments"), not a tensor")
            }
            return data
        case "torch._utils._rebuild_tensor_v2":
            return try make(.tensor(try rebuildTensor(arguments, invalid: invalid)), offset: offset)
        default:
            return try make(.instance(callable: callable), items: arguments, offset: offset)
        }
    }

    /// `_rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks, …)`, checked so that
    /// every element the view can reach lies inside the storage.
    private func rebuildTensor(_ arguments: [PickleValue], invalid: (String) -> PickleError) throws -> PickleTensor {
        guard arguments.count >= 4, case .storage(let storage)? = self[arguments[0]]?.kind else {
            throw invalid(arguments.first.map { "\(describe($0)), not a storage" } ?? "no arguments")
        }
        guard case .int(let offset) = arguments[1], offset >= 0, offset <= storage.count else {
            throw invalid("storage offset \(describe(arguments[1]))")
        }
        func integers(_ value: PickleValue, _ what: String) throws -> [Int] {
            guard let tuple = self[value], tuple.kind == .tuple, tuple.items.count <= 16 else {
                throw invalid("\(what) \(describe(value)), not a tuple of at most 16 integers")
            }
            return try tuple.items.map {
                guard case .int(let i) = $0, i >= 0 else { throw invalid("\(what) holding \(describe($0))") }
                return i
            }
        }
        let shape = try integers(arguments[2], "size")
        let strides = try integers(arguments[3], "stride")
        guard shape.count == strides.count else { throw invalid("size \(shape) and stride \(strides) of different ranks") }
        // The last element reached is offset + Σ (size − 1)·stride; it must lie inside the storage.
        var last = offset
        var count = 1
        for (size, stride) in zip(shape, strides) {
            let (elements, overflow) = count.multipliedReportingOverflow(by: size)
            let (step, stepOverflow) = max(size - 1, 0).multipliedReportingOverflow(by: stride)
            let (reach, reachOverflow) = last.addingReportingOverflow(step)
            guard !overflow, !stepOverflow, !reachOverflow else { throw invalid("size \(shape) and stride \(strides) that overflow") }
            count = elements
            last = reach
        }
        guard count == 0 || last < storage.count else {
            throw invalid("a view (offset \(offset), size \(shape), stride \(strides)) reaching element \(last) "
                          + "of a \(storage.count)-element storage '\(storage.key)'")
        }
        return PickleTensor(storage: storage, offset: offset, shape: shape, strides: strides)
    }

    /// torch's persistent ids: `('storage', torch.<Type>Storage, key, location, element count)`.
    private mutating func persistentLoad(_ id: PickleValue, offset: Int) throws -> PickleValue {
        guard let tuple = self[id], tuple.kind == .tuple, tuple.items.count == 5,
              tuple.items[0] == .string("storage"),
              case .global("torch", let type)? = self[tuple.items[1]]?.kind,
              let storageType = Self.storageTypes[type],
              case .string(let key) = tuple.items[2],
              case .int(let count) = tuple.items[4], count >= 0, !count.multipliedReportingOverflow(by: storageType.size).overflow
        else {
            throw PickleError.notAStorage(persistentID: describe(id) + (self[id].map { o in
                " (" + o.items.map(describe).joined(separator: ", ") + ")" } ?? ""), offset: offset)
        }
        return try make(.storage(PickleStorage(type: type, dtype: storageType.dtype, elementSize: storageType.size, key: key, count: count)),
                        offset: offset)
    }

    /// torch storage classes: the dtype where the weights may use it, and the element size.
    private static let storageTypes: [String: (dtype: SafeTensorsFile.DType?, size: Int)] = [
        "HalfStorage": (.f16, 2), "FloatStorage": (.f32, 4), "BFloat16Storage": (.bf16, 2),
        "DoubleStorage": (nil, 8), "LongStorage": (nil, 8), "IntStorage": (nil, 4), "ShortStorage": (nil, 2),
        "CharStorage": (nil, 1), "ByteStorage": (nil, 1), "BoolStorage": (nil, 1),
    ]

    private static let opcodeNames: [UInt8: String] = [
        0x80: "PROTO", 0x95: "FRAME", 0x2E: "STOP", 0x28: "MARK", 0x30: "POP", 0x31: "POP_MARK", 0x32: "DUP",
        0x4E: "NONE", 0x88: "NEWTRUE", 0x89: "NEWFALSE", 0x4A: "BININT", 0x4B: "BININT1", 0x4D: "BININT2",
        0x8A: "LONG1", 0x8B: "LONG4", 0x47: "BINFLOAT", 0x58: "BINUNICODE", 0x8C: "SHORT_BINUNICODE",
        0x8D: "BINUNICODE8", 0x54: "BINSTRING", 0x55: "SHORT_BINSTRING", 0x42: "BINBYTES", 0x43: "SHORT_BINBYTES",
        0x8E: "BINBYTES8", 0x96: "BYTEARRAY8", 0x29: "EMPTY_TUPLE", 0x74: "TUPLE", 0x85: "TUPLE1", 0x86: "TUPLE2",
        0x87: "TUPLE3", 0x5D: "EMPTY_LIST", 0x6C: "LIST", 0x61: "APPEND", 0x65: "APPENDS", 0x7D: "EMPTY_DICT",
        0x64: "DICT", 0x73: "SETITEM", 0x75: "SETITEMS", 0x8F: "EMPTY_SET", 0x90: "ADDITEMS", 0x91: "FROZENSET",
        0x63: "GLOBAL", 0x93: "STACK_GLOBAL", 0x52: "REDUCE", 0x81: "NEWOBJ", 0x92: "NEWOBJ_EX", 0x62: "BUILD",
        0x51: "BINPERSID", 0x71: "BINPUT", 0x72: "LONG_BINPUT", 0x94: "MEMOIZE", 0x68: "BINGET", 0x6A: "LONG_BINGET",
    ]
}

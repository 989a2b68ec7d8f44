import Foundation

/// A value in an architecture row's argument list, as the Ultralytics yaml writes it.
package enum ArchValue: Sendable, Equatable, Decodable, CustomStringConvertible {
    case int(Int), double(Double), bool(Bool), string(String), list([ArchValue])

    /// As the JSON writes it, for error messages.
    package var description: String {
        switch self {
        case .int(let i): "\(i)"
        case .double(let d): "\(d)"
        case .bool(let b): "\(b)"
        case .string(let s): "\"\(s)\""
        case .list(let l): "[" + l.map(\.description).joined(separator: ", ") + "]"
        }
    }

    package init(from decoder: Decoder) throws {
        let c = try decoder.singleValueContainer()
        if let b = try? c.decode(Bool.self) { self = .bool(b) }
        else if let i = try? c.decode(Int.self) { self = .int(i) }
        else if let d = try? c.decode(Double.self) { self = .double(d) }
        else if let s = try? c.decode(String.self) { self = .string(s) }
        else { self = .list(try c.decode([ArchValue].self)) }
    }

    var int: Int? {
        switch self {
        case .int(let i): i
        case .double(let d) where d == d.rounded(): Int(exactly: d)
        default: nil
        }
    }

    var double: Double? {
        switch self {
        case .int(let i): Double(i)
        case .double(let d): d
        default: nil
        }
    }

    var bool: Bool? {
        if case .bool(let b) = self { return b }
        return nil
    }
}

/// One `[from, repeats, module, args]` row of `backbone + head`.
package struct ArchRow: Sendable, Equatable, Decodable {
    package let from: [Int]
    package let repeats: Int
    package let module: String
    package let args: [ArchValue]

    package init(from decoder: Decoder) throws {
        var c = try decoder.unkeyedContainer()
        if let single = try? c.decode(Int.self) { from = [single] } else { from = try c.decode([Int].self) }
        repeats = try c.decode(Int.self)
        module = try c.decode(String.self)
        args = try c.decode([ArchValue].self)
    }
}

/// The Ultralytics model dictionary (the parsed model yaml) stored as `arch` in a weight file.
package struct Architecture: Sendable, Decodable {
    package let nc: Int
    package let scales: [String: [Double]]?
    package var scale: String?
    package let backbone: [ArchRow]
    package let head: [ArchRow]
    package var endToEnd: Bool
    package let regMax: Int
    package let kptShape: [Int]?

    enum CodingKeys: String, CodingKey {
        case nc, scales, scale, backbone, head, end2end, reg_max, kpt_shape
    }

    package init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        nc = try c.decode(Int.self, forKey: .nc)
        scales = try c.decodeIfPresent([String: [Double]].self, forKey: .scales)
        scale = try c.decodeIfPresent(String.self, forKey: .scale)
        backbone = try c.decode([ArchRow].self, forKey: .backbone)
        head = try c.decode([ArchRow].self, forKey: .head)
        endToEnd = try c.decodeIfPresent(Bool.self, forKey: .end2end) ?? false
        regMax = try c.decodeIfPresent(Int.self, forKey: .reg_max) ?? 16
        kptShape = try c.decodeIfPresent([Int].self, forKey: .kpt_shape)
    }

    /// Parses the `arch` metadata JSON and checks its model-wide numbers and every row's repeats.
    package init(json: String) throws {
        do {
            self = try JSONDecoder().decode(Architecture.self, from: Data(json.utf8))
        } catch {
            throw ModelError.invalidMetadata(key: "arch", value: json, reason: "not an Ultralytics model dict (\(error))")
        }
        try validate()
    }

    /// Bounds checked before any size is computed from them, so an edited spec cannot overflow
    /// or trap later: nc, reg_max and each row's repeats (channels, kernels and strides are
    /// checked where a module reads its row's arguments, `ModuleSpec`).
    private func validate() throws {
        guard (1...100_000).contains(nc) else {
            throw ModelError.invalidMetadata(key: "arch", value: "nc = \(nc)", reason: "the class count must be in 1...100000")
        }
        guard (1...64).contains(regMax) else {
            throw ModelError.invalidMetadata(key: "arch", value: "reg_max = \(regMax)", reason: "reg_max must be in 1...64")
        }
        for (i, row) in rows.enumerated() where !(1...64).contains(row.repeats) {
            throw ModelError.invalidArchitecture(layer: i, reason: "\(row.module) repeats \(row.repeats) must be in 1...64")
        }
    }

    package var rows: [ArchRow] { backbone + head }

    /// The scale used: `scale`, or the first of `scales` as Ultralytics assumes.
    /// (JSON objects keep no order, so "first" is the smallest of n/s/m/l/x present.)
    package var resolvedScale: String? {
        if let scale { return scale }
        guard let keys = scales?.keys else { return nil }
        return ["n", "s", "m", "l", "x"].first(where: keys.contains) ?? keys.sorted().first
    }

    /// depth, width and max-channel multipliers of the resolved scale.
    package func multipliers() throws -> (depth: Double, width: Double, maxChannels: Int) {
        guard let scale = resolvedScale else { return (1, 1, Int.max) }
        guard let m = scales?[scale], m.count == 3 else {
            throw ModelError.invalidMetadata(key: "arch", value: scale,
                                             reason: "scale '\(scale)' is not in scales \(scales?.keys.sorted() ?? [])")
        }
        guard (m[0] > 0 && m[0] <= 16), (m[1] > 0 && m[1] <= 16), let maxChannels = Int(exactly: m[2]),
              (1...65_536).contains(maxChannels) else {
            throw ModelError.invalidMetadata(key: "arch", value: "\(m)",
                                             reason: "scale '\(scale)' needs depth and width in (0, 16] and max channels in 1...65536")
        }
        return (m[0], m[1], maxChannels)
    }
}

/// The smallest multiple of `divisor` not below `x` (Ultralytics `make_divisible`).
package func makeDivisible(_ x: Double, _ divisor: Int = 8) -> Int {
    Int((x / Double(divisor)).rounded(.up)) * divisor
}

/// Repeats after depth scaling: `max(round(n · depth), 1)` with Python's half-to-even rounding.
package func scaledRepeats(_ n: Int, depth: Double) -> Int {
    n > 1 ? max(Int((Double(n) * depth).rounded(.toNearestOrEven)), 1) : n
}

extension Architecture {
    /// Families whose spec ships in `Specs/` (the Ultralytics yaml as JSON).
    package static let builtinFamilies = ["yolo26", "yolo11"]
    package static let builtinTasks = ["", "-seg", "-pose", "-obb", "-cls"]

    /// A built-in spec by model name: family, scale letter and task suffix, e.g. "yolo26n",
    /// "yolo11x" or "yolo26s-seg". Returns nil for names that are not a known architecture.
    package static func builtin(named name: String) throws -> Architecture? {
        for family in builtinFamilies where name.hasPrefix(family) {
            let rest = name.dropFirst(family.count)
            guard let scale = rest.first.map(String.init), ["n", "s", "m", "l", "x"].contains(scale) else { return nil }
            let task = String(rest.dropFirst())
            guard builtinTasks.contains(task),
                  let url = Bundle.module.url(forResource: family + task, withExtension: "json", subdirectory: "Specs")
            else { return nil }
            var arch = try Architecture(json: String(decoding: try Data(contentsOf: url), as: UTF8.self))
            arch.scale = scale
            return arch
        }
        return nil
    }
}

import Foundation
import Tensor

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
    /// Multipliers of a spec without `scales` (YOLOv3's), 1 when absent.
    package let depthMultiple: Double, widthMultiple: Double
    /// The activation of every `Conv` (Ultralytics `Conv.default_act`), as Python, e.g.
    /// "torch.nn.ReLU()" (YOLOv6); nil for SiLU.
    package let activationName: String?

    enum CodingKeys: String, CodingKey {
        case nc, scales, scale, backbone, head, end2end, reg_max, kpt_shape, depth_multiple, width_multiple, activation
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
        depthMultiple = try c.decodeIfPresent(Double.self, forKey: .depth_multiple) ?? 1
        widthMultiple = try c.decodeIfPresent(Double.self, forKey: .width_multiple) ?? 1
        activationName = try c.decodeIfPresent(String.self, forKey: .activation)
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

    /// The scale used: `scale`, or the first of `scales` as Ultralytics assumes; nil without
    /// `scales`. (JSON objects keep no order, so "first" is the smallest of n/s/m/l/x present.)
    package var resolvedScale: String? {
        guard let keys = scales?.keys else { return nil }
        if let scale, !scale.isEmpty { return scale }
        return ["n", "s", "m", "l", "x"].first(where: keys.contains) ?? keys.sorted().first
    }

    /// depth, width and max-channel multipliers of the resolved scale, or without `scales`,
    /// `depth_multiple` and `width_multiple` and no channel cap.
    package func multipliers() throws -> (depth: Double, width: Double, maxChannels: Int) {
        guard let scale = resolvedScale else {
            guard depthMultiple > 0 && depthMultiple <= 16 && widthMultiple > 0 && widthMultiple <= 16 else {
                throw ModelError.invalidMetadata(key: "arch", value: "depth_multiple \(depthMultiple), width_multiple \(widthMultiple)",
                                                 reason: "the multiples must be in (0, 16]")
            }
            return (depthMultiple, widthMultiple, Int.max)
        }
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

    /// The activation `activationName` names: `[torch.]nn.` SiLU, ReLU, LeakyReLU(0.1),
    /// Sigmoid or Identity, with no other arguments.
    package func activation() throws -> Activation {
        guard let name = activationName else { return .silu }
        let call = name.filter { !$0.isWhitespace }
        let known: [String: Activation] = ["SiLU()": .silu, "ReLU()": .relu, "LeakyReLU(0.1)": .leakyReLU,
                                           "LeakyReLU(negative_slope=0.1)": .leakyReLU, "Sigmoid()": .sigmoid, "Identity()": .none]
        for prefix in ["nn.", "torch.nn."] where call.hasPrefix(prefix) {
            if let activation = known[String(call.dropFirst(prefix.count))] { return activation }
        }
        throw ModelError.invalidMetadata(key: "arch", value: "activation \(name)",
                                         reason: "supported: nn.SiLU(), nn.ReLU(), nn.LeakyReLU(0.1), nn.Sigmoid(), nn.Identity()")
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
    /// The specs in `Specs/` (Ultralytics model yamls as JSON), by name: "yolo26", "yolov8-seg-p6"…
    package static var builtinSpecs: [String] {
        let specs = Bundle.module.url(forResource: "Specs", withExtension: nil)
        let files = specs.flatMap { try? FileManager.default.contentsOfDirectory(atPath: $0.path) } ?? []
        return files.filter { $0.hasSuffix(".json") }.map { String($0.dropLast(5)) }.sorted()
    }

    /// A built-in spec by model name, resolved as Ultralytics' `yaml_model_load` resolves a yaml:
    /// YOLOv3/v5 "u" names are the plain ones (yolov5nu → yolov5n), "yolov5n6" is "yolov5n-p6";
    /// the spec named so, else the family's with the scale letter after the version taken out
    /// ("yolov8s-seg" → yolov8-seg), at that scale. A spec with `scales` needs one of them named;
    /// one without ignores the letter (yolov3-tinyu has none). Returns nil for names that are not
    /// a known architecture.
    package static func builtin(named name: String) throws -> Architecture? {
        var stem = name
        if stem.hasPrefix("yolov3") || stem.hasPrefix("yolov5"), stem.hasSuffix("u") { stem.removeLast() }
        if let p6 = stem.wholeMatch(of: /(yolov[58][nslmx])6/) { stem = p6.1 + "-p6" }
        guard let parts = stem.wholeMatch(of: /(yolov?[0-9]+)([nslmx]?)([a-z0-9-]*)/),
              var arch = try builtin(spec: stem) ?? builtin(spec: String(parts.1 + parts.3))
        else { return nil }
        if let scales = arch.scales {
            guard scales[String(parts.2)] != nil else { return nil }
            arch.scale = String(parts.2)
        }
        return arch
    }

    /// The spec `Specs/<name>.json` as it is (no scale chosen), or nil.
    package static func builtin(spec name: String) throws -> Architecture? {
        guard let url = Bundle.module.url(forResource: name, withExtension: "json", subdirectory: "Specs") else { return nil }
        return try Architecture(json: String(decoding: try Data(contentsOf: url), as: UTF8.self))
    }
}

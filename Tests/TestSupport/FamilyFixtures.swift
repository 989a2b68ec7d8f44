import Foundation

/// The family parity fixtures of `scripts/make-family-fixtures`: tiny graphs of every Ultralytics
/// architecture family whose weights both PyTorch and these tests compute from a formula.
public enum FamilyFixtures {
    /// `Tests/Fixtures/families`.
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/families")

    /// The safetensors file (F32) that `NAME.json` describes, every value from the formula in
    /// `scripts/make-family-fixtures`.
    public static func weights(_ name: String) throws -> Data {
        struct Fixture: Decodable {
            let metadata: [String: String]
            let tensors: [Entry]
            struct Entry: Decodable {
                let name: String, shape: [Int], rule: String
                init(from decoder: Decoder) throws {
                    var c = try decoder.unkeyedContainer()
                    (name, shape, rule) = (try c.decode(String.self), try c.decode([Int].self), try c.decode(String.self))
                }
            }
        }
        let fixture = try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: directory.appendingPathComponent(name + ".json")))
        var header: [String: Any] = ["__metadata__": fixture.metadata]
        var body = [Float]()
        for t in fixture.tensors {
            let start = body.count * 4
            body += values(t.name, shape: t.shape, rule: t.rule)
            header[t.name] = ["dtype": "F32", "shape": t.shape, "data_offsets": [start, body.count * 4]]
        }
        var json = try JSONSerialization.data(withJSONObject: header)
        json += Data(repeating: 0x20, count: (8 - json.count % 8) % 8)
        var data = withUnsafeBytes(of: UInt64(json.count).littleEndian) { Data($0) }
        data += json
        body.withUnsafeBytes { data += $0 }
        return data
    }

    /// a = (splitmix64(fnv1a64(name) + i) >> 54) / 1024, then the rule's float32 arithmetic.
    static func values(_ name: String, shape: [Int], rule: String) -> [Float] {
        let count = shape.reduce(1, *)
        if rule == "i" { return (0..<count).map(Float.init) }
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        for byte in name.utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
        let scale = 1 / Float(shape.dropFirst().reduce(1, *)).squareRoot()
        return (0..<count).map { i in
            var z = hash &+ UInt64(i) &+ 0x9E37_79B9_7F4A_7C15
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            let a = Float((z ^ (z >> 31)) >> 54) / 1024
            switch rule {
            case "w": return (2 * a - 1) * scale
            case "b": return (2 * a - 1) / 5
            default: return a + 0.5
            }
        }
    }
}

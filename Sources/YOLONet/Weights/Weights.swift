import Foundation
import Tensor

/// The arithmetic of a graph's convolutions.
package enum Precision: String, Sendable, CaseIterable {
    /// 32-bit floats throughout.
    case fp32
    /// Ungrouped convolutions in 8-bit integers (`quantizedConv2d`), the rest in floats.
    case int8
}

/// Where a graph's parameters come from while it is built: a weight file bound strictly by
/// name, or seeded random values for benchmarking an architecture without weights.
package protocol WeightSource {
    /// The precision the layers built from these weights compute in.
    var precision: Precision { get }
    /// A Ultralytics `Conv` (conv + BatchNorm) or a plain `nn.Conv2d` with bias at `prefix`,
    /// returned with BatchNorm folded in: weight [cout, cinPerGroup, k, k], bias [cout].
    mutating func conv(_ prefix: String, cout: Int, cinPerGroup: Int, kernel: Int, plain: Bool) throws
        -> (weight: Tensor, bias: [Float])
    /// A raw tensor of a given shape.
    mutating func tensor(_ name: String, shape: [Int]) throws -> Tensor
    /// Whether any tensor lives under `prefix` (a module that may have been removed by fusion).
    func contains(prefix: String) -> Bool
    /// Accepts and ignores every tensor under `prefix`: training-only modules (Pose26's flow
    /// model and sigma head, Proto26's semantic branch) that unfused checkpoints carry.
    mutating func discard(prefix: String)
}

/// Binds tensors from a safetensors file by their Ultralytics `state_dict` names, checking
/// every shape and remembering what was used so that leftovers can be reported.
package struct FileWeights: WeightSource {
    let file: SafeTensorsFile
    let bnEps: Double
    package let precision: Precision
    private(set) var used = Set<String>()

    package init(file: SafeTensorsFile, precision: Precision = .fp32) throws {
        (self.file, self.precision) = (file, precision)
        if let text = file.metadata["bn_eps"] {
            guard let eps = Double(text.trimmingCharacters(in: .whitespaces)), eps > 0, eps < 1 else {
                throw ModelError.invalidMetadata(key: "bn_eps", value: text, reason: "not a number in (0, 1)")
            }
            bnEps = eps
        } else {
            bnEps = 1e-3  // Ultralytics' BatchNorm epsilon
        }
    }

    package mutating func tensor(_ name: String, shape: [Int]) throws -> Tensor {
        guard let entry = file.entries[name] else { throw ModelError.missingTensor(name: name, expectedShape: shape) }
        guard entry.shape == shape else { throw ModelError.shapeMismatch(name: name, expected: shape, actual: entry.shape) }
        used.insert(name)
        return try file.tensor(name)
    }

    package func contains(prefix: String) -> Bool {
        file.entries.keys.contains { $0.hasPrefix(prefix + ".") }
    }

    package mutating func discard(prefix: String) {
        for name in file.entries.keys where name.hasPrefix(prefix + ".") { used.insert(name) }
    }

    package mutating func conv(_ prefix: String, cout: Int, cinPerGroup: Int, kernel: Int, plain: Bool) throws
        -> (weight: Tensor, bias: [Float]) {
        let shape = [cout, cinPerGroup, kernel, kernel]
        if plain {
            return (try tensor(prefix + ".weight", shape: shape), try tensor(prefix + ".bias", shape: [cout]).scalars)
        }
        var weight = try tensor(prefix + ".conv.weight", shape: shape)
        guard file.entries[prefix + ".bn.weight"] != nil else {
            return (weight, try tensor(prefix + ".conv.bias", shape: [cout]).scalars)
        }
        // Fold BatchNorm: w' = w·γ/√(σ²+ε), b' = β − μ·γ/√(σ²+ε), in Double.
        let gamma = try tensor(prefix + ".bn.weight", shape: [cout]).scalars
        let beta = try tensor(prefix + ".bn.bias", shape: [cout]).scalars
        let mean = try tensor(prefix + ".bn.running_mean", shape: [cout]).scalars
        let variance = try tensor(prefix + ".bn.running_var", shape: [cout]).scalars
        let perChannel = weight.count / max(cout, 1)
        var bias = [Float](repeating: 0, count: cout)
        for c in 0..<cout {
            let factor = Double(gamma[c]) / (Double(variance[c]) + bnEps).squareRoot()
            for i in (c * perChannel)..<((c + 1) * perChannel) {
                weight.scalars[i] = Float(Double(weight.scalars[i]) * factor)
            }
            bias[c] = Float(Double(beta[c]) - Double(mean[c]) * factor)
        }
        return (weight, bias)
    }

    /// Tensors of the file that nothing bound.
    package var unused: [String] { file.names.filter { !used.contains($0) } }
}

/// Seeded random parameters in a sane range (uniform, scaled by 1/√fan-in), for timing an
/// architecture without its weights. Also counts parameters the way PyTorch reports them for
/// the unfused model: conv weights, BatchNorm γ and β, conv biases.
package struct RandomWeights: WeightSource {
    private var state: UInt64
    package let precision: Precision
    package private(set) var parameterCount = 0

    package init(seed: UInt64 = 0x5EED, precision: Precision = .fp32) { (state, self.precision) = (seed, precision) }

    private mutating func uniform(_ count: Int, scale: Float) -> [Float] {
        (0..<count).map { _ in
            // SplitMix64 → [-scale, scale)
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            return (Float(z >> 40) / Float(1 << 24) * 2 - 1) * scale
        }
    }

    package mutating func tensor(_ name: String, shape: [Int]) throws -> Tensor {
        let count = shape.reduce(1, *)
        parameterCount += count
        return Tensor(shape: shape, scalars: uniform(count, scale: 1))
    }

    package func contains(prefix: String) -> Bool { true }

    package func discard(prefix: String) {}

    package mutating func conv(_ prefix: String, cout: Int, cinPerGroup: Int, kernel: Int, plain: Bool) throws
        -> (weight: Tensor, bias: [Float]) {
        let fanIn = cinPerGroup * kernel * kernel
        parameterCount += cout * fanIn + (plain ? cout : 2 * cout)
        let weight = Tensor(shape: [cout, cinPerGroup, kernel, kernel],
                            scalars: uniform(cout * fanIn, scale: 1 / Float(fanIn).squareRoot()))
        return (weight, uniform(cout, scale: 0.1))
    }
}

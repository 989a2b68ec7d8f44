import Tensor

/// An Ultralytics module a spec row can name: how it is built from its row, what it costs, and
/// (through `Layer` or `Head`) how it runs. Adding one: a type conforming to `Layer` or `Head`
/// in a file of its own, and its spec name in `Network.modules`. While it runs, it shows the
/// outputs of the modules inside it to `ws.observe` by their `state_dict` names.
protocol Module: Sendable {
    /// Whether the row's (depth-scaled) repeats are the module's own; other modules need 1.
    static var repeatable: Bool { get }
    /// The module `spec` describes, its parameters bound from `weights` by their `state_dict`
    /// names under `spec.prefix` (a missing, misshapen or unbound tensor is an error).
    init(_ spec: ModuleSpec, _ weights: inout some WeightSource) throws
    /// Output channels (a head's: its class count).
    var channels: Int { get }
    /// 2 × multiply-adds of its convolutions and matrix products, for inputs and an output of
    /// the given planes.
    func flops(inputs: [Plane], output: Plane) -> Double
    /// Parameters as the graph runs (BatchNorm folded into conv biases).
    var parameterCount: Int { get }
    /// Whether it holds an attention block, whose scores grow with the square of the positions.
    var hasAttention: Bool { get }
    /// The fewest areas its attention splits the positions into (YOLO12's area attention):
    /// the largest scores are (positions / areas)².
    var attentionAreas: Int { get }
}

extension Module {
    static var repeatable: Bool { false }
    var hasAttention: Bool { false }
    var attentionAreas: Int { 1 }
}

/// A map's height and width.
typealias Plane = (height: Int, width: Int)

/// A module before the head: one output map.
protocol Layer: Module {
    /// The output's stride (input-to-output size ratio) when the first input's is `inputStride`.
    func outputStride(_ inputStride: Int) -> Int
    /// The output's height and width when the first input's are `height` × `width`.
    func outputSize(height: Int, width: Int) -> Plane
    /// Whether the layer may release its input once read and allocate its own output after its
    /// temporaries, lowering the peak of live maps (`forward`'s `consuming` and a nil `y`).
    var consumesInput: Bool { get }
    /// Runs on `input(k)`, the map of the k-th layer of its `from`, writing `y` and returning it.
    /// `y` is nil only for a layer that `consumesInput` and owns its output: it allocates that
    /// itself. With `consuming`, it releases `input(0)` once read.
    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map
    /// Whether, built with `ModuleSpec.upsampledFront`, it runs on the coarse map and the rest
    /// apart (`forward(coarse:rest:…)`), and the graph skips the upsampling and concatenation.
    var splitsUpsampledFront: Bool { get }
    /// Runs on the concatenation of `coarse` upsampled (`ModuleSpec.upsampledFront`) and `rest`,
    /// as `forward` on that map would.
    func forward(coarse: Map, rest: Map, into y: Map?, _ ws: Workspace) -> Map
}

extension Layer {
    func outputStride(_ inputStride: Int) -> Int { inputStride }
    func outputSize(height: Int, width: Int) -> Plane { (height, width) }
    var consumesInput: Bool { false }
    var splitsUpsampledFront: Bool { false }
    func forward(coarse: Map, rest: Map, into y: Map?, _ ws: Workspace) -> Map {
        preconditionFailure("\(Self.self) does not split an upsampled front")
    }
}

/// A module input's first `channels`: a map `scale` times coarser, upsampled (nearest) and
/// concatenated before the rest (Ultralytics' heads: nn.Upsample, Concat, then a C2f or C3k2).
/// A 1×1 convolution is linear and pointwise, so on those channels it equals the upsampled
/// product of the coarse map: scale² fewer multiply-adds, and neither map formed.
struct UpsampledFront {
    let channels: Int, scale: Int
}

/// A row of the architecture spec with what a module needs to build itself from it: its place
/// in the graph, its inputs, the model-wide settings, and readers of its arguments that turn
/// bad values into `ModelError.invalidArchitecture` naming the layer.
struct ModuleSpec {
    /// The layer's index: the module is `model.<index>`.
    let index: Int
    let row: ArchRow
    let architecture: Architecture
    /// Absolute indices of the layers feeding this one (-1 is the network input), with their
    /// channels and strides.
    let from: [Int], inputChannels: [Int], inputStrides: [Int]
    /// The scale's width multiplier and channel cap, and the row's repeats after depth scaling.
    let width: Double, maxChannels: Int, repeats: Int
    /// A graph without C3k2, A2C2f or C2fCIB (YOLOv3 to v9): its Detect class branches are
    /// plain 3×3 convs.
    let legacy: Bool
    /// Which of a repeated module's copies this is (`Sequential`), or nil.
    var copy: Int? = nil
    /// Set by `Network` when the module's one input is a Concat whose front is an upsampled map
    /// and neither is read elsewhere: a module that can, builds its first convolution split.
    var upsampledFront: UpsampledFront? = nil

    /// The module's `state_dict` prefix: `model.<index>`, a copy's `model.<index>.<copy>`.
    var prefix: String { copy.map { "model.\(index).\($0)" } ?? "model.\(index)" }
    var args: [ArchValue] { row.args }
    var isLast: Bool { index == architecture.rows.count - 1 }

    func fail(_ reason: String) -> ModelError { .invalidArchitecture(layer: index, reason: reason) }

    /// Argument j as an integer in `range` (`value` when absent, if given). The bounds keep absurd
    /// values in an edited spec from overflowing sizes later.
    func int(_ j: Int, _ name: String, default value: Int? = nil, in range: ClosedRange<Int> = 1...65_536) throws -> Int {
        if j >= args.count, let value { return value }
        guard j < args.count, let v = args[j].int, range.contains(v) else {
            let value = j < args.count ? "\(args[j])" : "missing"
            throw fail("argument \(j) (\(name)) = \(value) must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return v
    }

    func bool(_ j: Int, _ name: String, default value: Bool) throws -> Bool {
        if j >= args.count { return value }
        guard let v = args[j].bool else { throw fail("argument \(j) (\(name)) must be true or false") }
        return v
    }

    func double(_ j: Int, _ name: String, default value: Double) throws -> Double {
        if j >= args.count { return value }
        guard let v = args[j].double, v > 0, v <= 8 else {
            throw fail("argument \(j) (\(name)) = \(args[j]) must be a number in (0, 8]")
        }
        return v
    }

    /// Argument j as a list of `count` odd kernels (they keep the map size) in 1...63.
    func kernels(_ j: Int, _ name: String, default value: [Int], count: ClosedRange<Int>) throws -> [Int] {
        if j >= args.count { return value }
        guard case .list(let list) = args[j], count.contains(list.count),
              case let kernels = list.compactMap(\.int), kernels.count == list.count,
              kernels.allSatisfy({ (1...63).contains($0) && $0 % 2 == 1 }) else {
            throw fail("argument \(j) (\(name)) = \(args[j]) must list \(count.lowerBound)...\(count.upperBound) odd kernels in 1...63")
        }
        return kernels
    }

    /// Channels `c` scaled as Ultralytics does: capped, times the width, rounded up to 8.
    func scaled(_ c: Int) -> Int { makeDivisible(Double(min(c, maxChannels)) * width) }

    /// Argument 0, the output channels, scaled.
    func outChannels() throws -> Int {
        let c = try int(0, "output channels")
        guard c > 0 else { throw fail("output channels must be positive, got \(c)") }
        return scaled(c)
    }
}

import Tensor

/// A block of a CSP module's chain (`C2`, `C3`, a `Chain`'s): x [c1, H, W] → y [channels, H, W],
/// y apart from x.
protocol CSPBlock: Sendable {
    /// Its `state_dict` prefix, the name its output is observed by.
    var name: String { get }
    /// Output channels: a `Chain` gives the block a piece of that many.
    var channels: Int { get }
    var convs: [Conv] { get }
    /// Its attention blocks, whose matrix products cost FLOPs besides its convolutions'.
    var attention: [Attention] { get }
    /// Returns `y` with its range as its last convolution measured it (`Conv.callAsFunction`), or
    /// none when an add after it changed the values (GhostBottleneck).
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map
}

extension CSPBlock {
    var attention: [Attention] { [] }
}

extension [any CSPBlock] {
    var convs: [Conv] { flatMap(\.convs) }
    var attention: [Attention] { flatMap(\.attention) }
}

/// Ultralytics `Bottleneck`: cv2(cv1(x)), plus x when `shortcut` and c1 == c2.
/// x: [c1, H, W] → [c2, H, W]; hidden channels int(c2 · e); kernels k1 and k2, cv2 in `g` groups.
struct Bottleneck: CSPBlock, Layer {
    let name: String
    let cv1: Conv, cv2: Conv
    let residual: Bool

    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, shortcut: Bool = true, g: Int = 1,
         k1: Int = 3, k2: Int = 3, e: Double = 0.5) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden, k: k1)
        cv2 = try Conv(&w, p + ".cv2", hidden, c2, k: k2, g: g)
        residual = shortcut && c1 == c2
        name = p
    }

    /// A `Bottleneck` row (YOLOv3): [c2, shortcut, g, k, e], k a kernel or [k1, k2].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let channels = try spec.outChannels()
        let kernels = try spec.kernels(3, "kernels", default: [3, 3], count: 2...2)
        try self.init(&w, spec.prefix, spec.inputChannels[0], channels, shortcut: try spec.bool(1, "shortcut", default: true),
                      g: try spec.int(2, "groups", default: 1), k1: kernels[0], k2: kernels[1],
                      e: try spec.double(4, "expansion", default: 0.5))
    }

    var convs: [Conv] { [cv1, cv2] }
    var channels: Int { cv2.channels }
    var parameterCount: Int { convs.parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { convs.flops(output) }

    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let t = cv1(x, ws)
        ws.observe(cv1.name, t)
        let out = cv2(t, into: y, residual: residual ? x : nil, ws)
        ws.release(t)
        return out
    }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        self(input(0), into: y!, ws)
    }
}

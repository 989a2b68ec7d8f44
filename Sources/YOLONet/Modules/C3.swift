import Tensor

/// Ultralytics `C3` (CSP bottleneck with 3 convolutions) and the modules built as one: cv3(cat(m(cv1(x)),
/// cv2(x))), the blocks `m` chained on c2·e hidden channels. x: [c1, H, W] → [c2, H, W].
/// - `C3`: Bottlenecks with kernels 1 then 3 (e = 1).
/// - `C3k` (inside YOLO11's C3k2): Bottlenecks with kernels k, k.
/// - `C3Ghost` (YOLOv8-ghost): GhostBottlenecks.
/// - `RepCSP` (RepNCSPELAN4's stages): RepBottlenecks (`Bottleneck.init(rep:_:_:_:)`).
struct C3: CSPBlock, Layer {
    let name: String
    let cv1: Conv, cv2: Conv, cv3: Conv
    let m: [any CSPBlock]

    static var repeatable: Bool { true }

    /// `block(weights, prefix, hidden)` builds each of the `n` blocks.
    init<W: WeightSource>(_ w: inout W, _ p: String, _ c1: Int, _ c2: Int, n: Int, e: Double = 0.5,
                          block: (inout W, String, Int) throws -> any CSPBlock) throws {
        let hidden = Int(Double(c2) * e)
        cv1 = try Conv(&w, p + ".cv1", c1, hidden)
        cv2 = try Conv(&w, p + ".cv2", c1, hidden)
        cv3 = try Conv(&w, p + ".cv3", 2 * hidden, c2)
        m = try (0..<n).map { try block(&w, p + ".m.\($0)", hidden) }
        name = p
    }

    /// Ultralytics `C3k`: `n` Bottlenecks with kernels k, k.
    init(_ w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int, n: Int = 2, shortcut: Bool = true, g: Int = 1,
         e: Double = 0.5, k: Int = 3) throws {
        try self.init(&w, p, c1, c2, n: n, e: e) { try Bottleneck(&$0, $1, $2, $2, shortcut: shortcut, g: g, k1: k, k2: k, e: 1) }
    }

    /// A `C3` or `C3Ghost` row: [c2, shortcut, g, e].
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let shortcut = try spec.bool(1, "shortcut", default: true), g = try spec.int(2, "groups", default: 1)
        let ghost = spec.row.module == "C3Ghost"
        try self.init(&w, spec.prefix, spec.inputChannels[0], try spec.outChannels(), n: spec.repeats,
                      e: try spec.double(3, "expansion", default: 0.5)) { w, p, c in
            if ghost { return try GhostBottleneck(&w, p, c, c) }
            return try Bottleneck(&w, p, c, c, shortcut: shortcut, g: g, k1: 1, k2: 3, e: 1)
        }
    }

    var channels: Int { cv3.channels }
    var convs: [Conv] { [cv1, cv2, cv3] + m.convs }
    var parameterCount: Int { convs.parameterCount }
    func flops(inputs: [Plane], output: Plane) -> Double { convs.flops(output) }

    /// The blocks' last output and cv2(x) are written into the halves of cv3's input.
    func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
        let hidden = cv1.channels
        let joined = ws.map(channels: 2 * hidden, like: x)
        var first = joined.channels(0..<hidden)
        if m.isEmpty {
            first = cv1(x, into: first, ws)
            ws.observe(cv1.name, first)
        } else {
            var a = cv1(x, ws)
            ws.observe(cv1.name, a)
            for (j, block) in m.enumerated() {
                let next = block(a, into: j == m.count - 1 ? first : ws.map(channels: hidden, like: x), ws)
                ws.observe(block.name, next)
                ws.release(a)
                a = next
            }
            first = a
        }
        let second = cv2(x, into: joined.channels(hidden..<(2 * hidden)), ws)
        ws.observe(cv2.name, second)
        let out = cv3(joined.bounded(by: .union(first.range, second.range)), into: y, ws)
        ws.release(joined)
        return out
    }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        self(input(0), into: y!, ws)
    }
}

/// Ultralytics `C3k`: a C3 of k×k Bottlenecks (`C3.init(_:_:_:_:n:shortcut:g:e:k:)`).
typealias C3k = C3

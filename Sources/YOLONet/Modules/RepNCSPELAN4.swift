import Tensor

extension Bottleneck {
    /// Ultralytics `RepBottleneck` as `RepCSP` builds it (e = 1, shortcut): a 3×3/3×3 Bottleneck
    /// whose cv1 is a `RepConv` (`Conv.rep`). x: [c1, H, W] → [c2, H, W].
    init(rep w: inout some WeightSource, _ p: String, _ c1: Int, _ c2: Int) throws {
        cv1 = try Conv.rep(&w, p + ".cv1", c1, c2)
        cv2 = try Conv(&w, p + ".cv2", c2, c2, k: 3)
        residual = c1 == c2
        name = p
    }
}

/// Ultralytics `RepNCSPELAN4` (YOLOv9's CSP-ELAN) and `ELAN1`: cv1 to c3 channels, whose second
/// half (c3 / 2) feeds two chained stages of c4 channels, cv4 over all four pieces. A stage is a
/// RepCSP (a C3 of n RepBottlenecks) then a 3×3 Conv (`cv2.0`, `cv2.1`), or, in ELAN1, one 3×3
/// Conv (`cv2`).
/// x: [c1, H, W] → [c2, H, W].
struct RepNCSPELAN4: Layer {
    enum Stage: CSPBlock {
        case conv(Conv)
        case csp(C3, Conv, name: String)

        var name: String {
            switch self {
            case .conv(let conv): conv.name
            case .csp(_, _, let name): name
            }
        }

        var channels: Int {
            switch self {
            case .conv(let conv), .csp(_, let conv, _): conv.channels
            }
        }

        var convs: [Conv] {
            switch self {
            case .conv(let conv): [conv]
            case .csp(let csp, let conv, _): csp.convs + [conv]
            }
        }

        func callAsFunction(_ x: Map, into y: Map, _ ws: Workspace) -> Map {
            switch self {
            case .conv(let conv): return conv(x, into: y, ws)
            case .csp(let csp, let conv, _):
                let t = csp(x, into: ws.map(channels: csp.channels, like: x), ws)
                ws.observe(csp.name, t)
                let out = conv(t, into: y, ws)
                ws.release(t)
                return out
            }
        }
    }

    let chain: Chain

    /// A `RepNCSPELAN4` row: [c2, c3, c4, n]; an `ELAN1` row: [c2, c3, c4]. Ultralytics scales c2
    /// only: c3 and c4 are taken as written.
    init(_ spec: ModuleSpec, _ w: inout some WeightSource) throws {
        let elan1 = spec.row.module == "ELAN1"
        guard spec.args.count <= (elan1 ? 3 : 4) else {
            throw spec.fail("\(spec.row.module) takes \(elan1 ? "[c2, c3, c4]" : "[c2, c3, c4, n]"), got \(spec.args)")
        }
        let (c1, c2) = (spec.inputChannels[0], try spec.outChannels())
        let c3 = try spec.int(1, "c3"), c4 = try spec.int(2, "c4")
        let n = elan1 ? 1 : try spec.int(3, "repeats", default: 1, in: 1...64)
        let p = spec.prefix
        func stage(_ q: String, _ cin: Int) throws -> Stage {
            elan1 ? .conv(try Conv(&w, q, cin, c4, k: 3))
                : .csp(try C3(&w, q + ".0", cin, c4, n: n) { try Bottleneck(rep: &$0, $1, $2, $2) },
                       try Conv(&w, q + ".1", c4, c4, k: 3), name: q)
        }
        let cv1 = try Conv(&w, p + ".cv1", c1, c3)
        let stages = [try stage(p + ".cv2", c3 / 2), try stage(p + ".cv3", c4)]
        chain = Chain(first: cv1, last: try Conv(&w, p + ".cv4", c3 + 2 * c4, c2), blocks: stages, tail: c3 / 2)
    }

    var channels: Int { chain.channels }
    var parameterCount: Int { chain.convs.parameterCount }
    var consumesInput: Bool { true }
    func flops(inputs: [Plane], output: Plane) -> Double { chain.flops(output) }

    func forward(_ input: (Int) -> Map, into y: Map?, consuming: Bool, _ ws: Workspace) -> Map {
        chain(input(0), into: y, consuming: consuming, ws)
    }
}

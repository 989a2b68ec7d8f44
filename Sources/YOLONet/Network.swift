import Foundation
import Tensor

/// A YOLO graph built from an Ultralytics architecture dict, the way `parse_model` builds it:
/// layer i is `model.i`, fed by the outputs its `from` list names. The graph is data: the
/// nodes below and their weights; `forward` just walks them.
package struct Network: Sendable {
    /// Indirect: a layer's value (its weights' arrays and parameters, hundreds of bytes) in a box,
    /// so walking the nodes copies a reference, not the value (the copies' memmove was 0.09 ms of
    /// a yolo26n pass, serial on any number of threads).
    indirect enum Op: Sendable {
        case conv(Conv)
        case c3k2(C3k2)
        case sppf(SPPF)
        case c2psa(C2PSA)
        case upsample(scale: Int)
        case concat
        case detect(Detect)
        case classify(Classify)
    }

    package struct Node: Sendable {
        /// Absolute indices of the layers feeding this one (-1 is the network input).
        package let from: [Int]
        /// The Ultralytics module name, e.g. "C3k2".
        package let type: String
        /// Output channels.
        package let channels: Int
        /// Input-to-output size ratio (8 means a map of H/8 × W/8).
        package let stride: Int
        let op: Op
    }

    package let nodes: [Node]
    /// Number of classes.
    package let classCount: Int
    /// Channels of the input image.
    package let inputChannels: Int
    /// Layers whose outputs later layers read (other than the next one), with the last layer
    /// that reads each: the output is dropped after it.
    let saved: [Int: Int]

    /// The task the head performs: "detect", "segment", "pose", "obb" or "classify".
    package var task: String {
        switch nodes.last?.op {
        case .classify?: "classify"
        case .detect(let head)?:
            switch head.task {
            case .detect: "detect"
            case .segment: "segment"
            case .pose: "pose"
            case .obb: "obb"
            }
        default: "detect"
        }
    }

    /// The largest stride: input sides must be multiples of it.
    package var maxStride: Int { nodes.reduce(1) { max($0, $1.stride) } }

    package init(architecture arch: Architecture, weights: inout some WeightSource, inputChannels: Int = 3) throws {
        let (depth, width, maxChannels) = try arch.multipliers()
        let scale = arch.resolvedScale
        let hasC3k2 = arch.rows.contains { $0.module == "C3k2" }
        var nodes = [Node]()
        var saved = [Int: Int]()
        do {
            for (i, row) in arch.rows.enumerated() {
                func fail(_ reason: String) -> ModelError { .invalidArchitecture(layer: i, reason: reason) }
                let from = row.from.map { $0 < 0 ? i + $0 : $0 }
                guard !from.isEmpty, from.allSatisfy({ $0 < i && ($0 >= 0 || i == 0) }) else {
                    throw fail("'from' \(row.from) must name earlier layers")
                }
                if i == 0 && from != [-1] { throw fail("the first layer must read the input (from -1)") }
                for f in from where f >= 0 && f != i - 1 { saved[f] = i }
                let inChannels = from.map { $0 < 0 ? inputChannels : nodes[$0].channels }
                let inStride = from[0] < 0 ? 1 : nodes[from[0]].stride
                let c1 = inChannels[0]
                let args = row.args
                /// The bounds keep absurd values in an edited spec from overflowing sizes later.
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
                func outChannels() throws -> Int {
                    let c = try int(0, "output channels")
                    guard c > 0 else { throw fail("output channels must be positive, got \(c)") }
                    return makeDivisible(Double(min(c, maxChannels)) * width)
                }
                let repeats = scaledRepeats(row.repeats, depth: depth)
                let repeatable = ["C3k2", "C2PSA"].contains(row.module)
                if !repeatable && row.repeats != 1 {
                    throw fail("\(row.module) with \(row.repeats) repeats is not supported")
                }
                let p = "model.\(i)"
                let op: Op, channels: Int
                var stride = inStride
                switch row.module {
                case "Conv", "DWConv":
                    channels = try outChannels()
                    let k = try int(1, "kernel", default: 1, in: 1...64), s = try int(2, "stride", default: 1, in: 1...64)
                    guard args.count <= 3 else { throw fail("\(row.module) supports [c2, k, s], got \(args)") }
                    op = .conv(row.module == "Conv" ? try Conv(&weights, p, c1, channels, k: k, s: s)
                               : try Conv.depthwise(&weights, p, c1, channels, k: k, s: s))
                    stride *= s
                    guard stride <= 1 << 16 else { throw fail("the total stride \(stride) is too large") }
                case "C3k2":
                    channels = try outChannels()
                    let c3k = ["m", "l", "x"].contains(scale ?? "") ? true : try bool(1, "c3k", default: false)
                    guard try int(4, "groups", default: 1) == 1 else { throw fail("grouped C3k2 is not supported") }
                    op = .c3k2(try C3k2(&weights, p, c1, channels, n: repeats, c3k: c3k,
                                        e: try double(2, "expansion", default: 0.5),
                                        attention: try bool(3, "attn", default: false),
                                        shortcut: try bool(5, "shortcut", default: true)))
                case "SPPF":
                    channels = try outChannels()
                    // Ultralytics: rows with ≤ 2 yaml args predate YOLO26's unactivated cv1.
                    let k = try int(1, "kernel", default: 5, in: 1...63)
                    guard k % 2 == 1 else { throw fail("the SPPF pool kernel must be odd (it keeps the map size), got \(k)") }
                    op = .sppf(try SPPF(&weights, p, c1, channels, k: k, n: try int(2, "pools", default: 3, in: 1...16),
                                        shortcut: try bool(3, "shortcut", default: false),
                                        cv1Activation: args.count <= 2 ? .silu : .none))
                case "C2PSA":
                    channels = try outChannels()
                    op = .c2psa(try C2PSA(&weights, p, c1, channels, n: repeats, e: try double(1, "expansion", default: 0.5)))
                case "nn.Upsample":
                    let factor = try int(1, "scale_factor", in: 1...64)
                    guard factor >= 1, args.count < 3 || args[2] == .string("nearest") else {
                        throw fail("only nearest upsampling by a positive integer factor is supported, got \(args)")
                    }
                    guard inStride % factor == 0 else { throw fail("upsampling ×\(factor) a map of stride \(inStride)") }
                    channels = c1
                    op = .upsample(scale: factor)
                    stride /= factor
                case "Concat":
                    guard try int(0, "dimension", default: 1, in: 1...1) == 1 else { throw fail("only channel concatenation is supported") }
                    guard from.allSatisfy({ ($0 < 0 ? 1 : nodes[$0].stride) == inStride }) else {
                        throw fail("concatenated maps \(from) have different strides")
                    }
                    channels = inChannels.reduce(0, +)
                    op = .concat
                case "Detect", "Segment26", "Pose26", "OBB26":
                    let nc: Int
                    switch args.first {
                    case .string("nc"): nc = arch.nc
                    case let value?: guard let v = value.int, v > 0 else { throw fail("nc must be a positive integer") }; nc = v
                    case nil: nc = arch.nc
                    }
                    guard i == arch.rows.count - 1 else { throw fail("the \(row.module) head must be the last layer") }
                    guard from.allSatisfy({ $0 >= 0 }) else { throw fail("\(row.module) reads layer outputs, not the input") }
                    let task: HeadTask
                    switch row.module {
                    case "Segment26":
                        let masks = try int(1, "masks", default: 32)
                        let protos = makeDivisible(Double(min(try int(2, "prototype channels", default: 256), maxChannels)) * width)
                        // Proto26 upsamples level i by 2^i onto level 0.
                        guard from.enumerated().allSatisfy({ nodes[$1].stride == nodes[from[0]].stride << $0 }) else {
                            throw fail("Segment26 needs levels whose strides double, got \(from.map { nodes[$0].stride })")
                        }
                        task = .segment(masks: masks, protoChannels: protos)
                    case "Pose26":
                        guard let shape = arch.kptShape, shape.count == 2, (1...1024).contains(shape[0]), (2...3).contains(shape[1]) else {
                            throw fail("Pose26 needs kpt_shape [keypoints, 2 or 3], got \(arch.kptShape.map { "\($0)" } ?? "none")")
                        }
                        task = .pose(keypoints: shape[0], dims: shape[1])
                    case "OBB26":
                        task = .obb(extras: try int(1, "extra parameters", default: 1))
                    default:
                        task = .detect
                    }
                    channels = nc
                    op = .detect(try Detect(&weights, p, nc: nc, regMax: arch.regMax, endToEnd: arch.endToEnd,
                                            legacy: !hasC3k2, task: task, channels: inChannels,
                                            strides: from.map { nodes[$0].stride }))
                case "Classify":
                    guard i == arch.rows.count - 1 else { throw fail("the Classify head must be the last layer") }
                    channels = row.args.first == .string("nc") ? arch.nc : try int(0, "classes")
                    guard channels > 0 else { throw fail("Classify needs a positive number of classes") }
                    op = .classify(try Classify(&weights, p, c1, nc: channels, k: try int(1, "kernel", default: 1, in: 1...64),
                                                s: try int(2, "stride", default: 1, in: 1...64)))
                default:
                    throw ModelError.unknownModule(layer: i, module: row.module)
                }
                nodes.append(Node(from: from, type: row.module.replacingOccurrences(of: "nn.", with: ""),
                                  channels: channels, stride: stride, op: op))
            }
        } catch ModelError.invalidArchitecture(layer: -1, let reason) {
            // A block's own checks do not know their layer: the one being built.
            throw ModelError.invalidArchitecture(layer: nodes.count, reason: reason)
        }
        switch nodes.last?.op {
        case .detect(let head)?: classCount = head.nc
        case .classify?: classCount = nodes[nodes.count - 1].channels
        default: throw ModelError.invalidArchitecture(layer: nodes.count - 1, reason: "the last layer must be a head")
        }
        self.nodes = nodes
        self.saved = saved
        self.inputChannels = inputChannels
    }

    /// Checks that `x` is a [1, C, H, W] image this graph can run on.
    package func validate(input x: Tensor) throws {
        let reason: String? =
            x.rank != 4 ? "expected [1, 3, H, W]"
            : x.shape[0] != 1 ? "batch size must be 1"
            : x.shape[1] != inputChannels ? "expected \(inputChannels) channels"
            : x.shape[2] <= 0 || x.shape[3] <= 0 || x.shape[2] % maxStride != 0 || x.shape[3] % maxStride != 0
                ? "height and width must be positive multiples of \(maxStride)"
            : x.shape[2] > 8192 || x.shape[3] > 8192 ? "height and width must be at most 8192"
            : nil
        if let reason { throw ModelError.invalidInput(shape: x.shape, reason: reason) }
    }

    /// Whether layer j writes the front of the map of the Concat just after it: the Concat reads
    /// it first and no other layer reads it. Not a Concat itself (its map may be the front of
    /// another's, sized for that one).
    private func writesConcatFront(_ j: Int) -> Bool {
        guard j >= 0 && j + 1 < nodes.count, case .concat = nodes[j + 1].op else { return false }
        if case .concat = nodes[j].op { return false }
        return nodes[j + 1].from[0] == j && !nodes[j + 1].from.dropFirst().contains(j) && saved[j] == nil
    }

    /// The Concat whose map layer j writes from the start, at channel `channel`: an earlier layer
    /// (not the one just before) whose last reader is that Concat, read by it once, so the Concat
    /// copies nothing of it (yolo26n: 0.45 ms of copies a pass, from the backbone's outputs into
    /// the head's Concats; ARCHITECTURE.md has what it did to the whole pass). Not a Concat itself
    /// (its map may be another's front).
    private func writesConcatBack(_ j: Int) -> (concat: Int, channel: Int)? {
        guard j >= 0, let i = saved[j], case .concat = nodes[i].op else { return nil }
        if case .concat = nodes[j].op { return nil }
        guard let k = nodes[i].from.firstIndex(of: j), nodes[i].from.lastIndex(of: j) == k else { return nil }
        return (i, nodes[i].from[..<k].reduce(0) { $0 + ($1 < 0 ? inputChannels : nodes[$1].channels) })
    }

    /// Runs the graph in a workspace of its own and copies the head's results out.
    /// `observe(i, output)` sees a copy of every top-level layer's output before the head.
    package func forward(_ x: Tensor, selection: HeadSelection = HeadSelection(),
                         observe: ((Int, Tensor) -> Void)? = nil) throws -> HeadOutput {
        let ws = Workspace()
        return try withExtendedLifetime(ws) {
            HeadOutput(try forward(x, in: ws, selection: selection, observe: observe.map { f in { f($0, Tensor($1)) } }))
        }
    }

    /// Runs the graph on x [1, C, H, W] in `ws`; the results are views into `ws`, valid until
    /// its next pass. `observe(i, output)` sees every top-level layer's output before the head.
    ///
    /// Each layer writes into a map the graph allocates for it (a layer read by the Concat just
    /// after it, into the front of the Concat's map), and an output is released after its last
    /// reader has run.
    package func forward(_ x: Tensor, in ws: Workspace, selection: HeadSelection = HeadSelection(),
                         observe: ((Int, Map) -> Void)? = nil) throws -> HeadMaps {
        try validate(input: x)
        return x.withMap { x in
            ws.begin(layers: nodes.count)
            defer { ws.end() }
            func input(_ j: Int) -> Map { j < 0 ? x : ws.outputs[j]! }
            /// Releases output j if it owns its block.
            func drop(_ j: Int) {
                if ws.owns[j], let y = ws.outputs[j] { ws.release(y) }
                ws.outputs[j] = nil
            }
            for (i, node) in nodes.enumerated() {
                let first = input(node.from[0])
                var height = first.height, width = first.width
                switch node.op {
                case .conv(let m): (height, width) = m.parameters.outputSize(h: height, w: width)
                case .upsample(let s): (height, width) = (height * s, width * s)
                case .detect(let head):
                    let result = head({ input(node.from[$0]) }, selection: selection, ws)
                    for j in 0..<i { drop(j) }
                    return result
                case .classify(let head):
                    let result = head(first, ws)
                    for j in 0..<i { drop(j) }
                    return result
                default: break
                }
                /// The map this layer writes: its own, or a Concat's front or back (or the Concat's whole
                /// map, placed already when an earlier input writes its back).
                func output() -> Map {
                    if case .concat = node.op, let placed = ws.outputs[i] { return placed }
                    if writesConcatFront(i - 1), let front = ws.outputs[i - 1] {
                        return Map(front.base, channels: node.channels, height: height, width: width)
                    }
                    if writesConcatFront(i) {
                        return (ws.outputs[i + 1] ?? ws.map(channels: nodes[i + 1].channels, height: height, width: width))
                            .channels(0..<node.channels)
                    }
                    if let (concat, channel) = writesConcatBack(i) {
                        // The Concat's map, kept in its own slot until it runs (placed already when
                        // another earlier input wrote its part).
                        let whole = ws.outputs[concat] ?? ws.map(channels: nodes[concat].channels, height: height, width: width)
                        ws.outputs[concat] = whole
                        return whole.channels(channel..<(channel + node.channels))
                    }
                    return ws.map(channels: node.channels, height: height, width: width)
                }
                ws.owns[i] = !writesConcatFront(i) && writesConcatBack(i) == nil
                let y: Map
                switch node.op {
                case .conv(let m): y = output(); m(first, into: y, ws)
                case .c3k2(let m):
                    // The block releases its input as soon as it has read it, when it is the last reader.
                    let j = node.from[0]
                    let consuming = j >= 0 && ws.owns[j] && (saved[j] ?? j + 1) == i
                    if consuming { ws.outputs[j] = nil }
                    y = m(first, into: ws.owns[i] ? nil : output(), consuming: consuming, ws)
                case .sppf(let m): y = output(); m(first, into: y, ws)
                case .c2psa(let m): y = output(); m(first, into: y, ws)
                case .upsample(let s): y = output(); upsampleNearest(first, scale: s, into: y)
                case .concat:
                    y = output()
                    var channel = 0
                    for j in node.from {
                        let part = input(j), destination = y.channels(channel..<(channel + part.channels))
                        // In place where its layer wrote it there (`writesConcatFront`, `writesConcatBack`).
                        if part.base != destination.base { part.write(to: destination) }
                        channel += part.channels
                    }
                case .detect, .classify: preconditionFailure("a head is the last layer")
                }
                observe?(i, y)
                ws.outputs[i] = y
                for j in node.from where j >= 0 && ws.outputs[j] != nil && (saved[j] ?? j + 1) == i { drop(j) }
                if saved[i] == nil && !nodes[i + 1].from.contains(i) { drop(i) }
            }
            preconditionFailure("a Network always ends in its head")
        }
    }
}

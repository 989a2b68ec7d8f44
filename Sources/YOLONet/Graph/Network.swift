import Foundation
import Tensor

/// A YOLO graph built from an Ultralytics architecture dict, the way `parse_model` builds it:
/// layer i is `model.i`, the `Module` its row names (`modules`), fed by the outputs its `from`
/// list names. The graph is data: the nodes below and their weights; `forward` just walks them.
package struct Network: Sendable {
    /// The module types a spec row can name, by its Ultralytics module name.
    static let modules: [String: any Module.Type] = [
        "Conv": Conv.self, "DWConv": Conv.self, "C3k2": C2f.self, "SPPF": SPPF.self, "C2PSA": C2PSA.self,
        "C2f": C2f.self, "C2": C2.self, "C3": C3.self, "C3Ghost": C3.self, "Bottleneck": Bottleneck.self, "SPP": SPPF.self,
        "GhostConv": GhostConv.self, "nn.MaxPool2d": MaxPool.self, "nn.ZeroPad2d": ZeroPad.self,
        "nn.ConvTranspose2d": ConvTranspose.self, "nn.Upsample": Upsample.self, "Concat": Concat.self,
        "Detect": Detect.self, "Segment": Detect.self, "Pose": Detect.self, "OBB": Detect.self, "v10Detect": Detect.self,
        "Segment26": Detect.self, "Pose26": Detect.self, "OBB26": Detect.self, "Classify": Classify.self,
        "RepNCSPELAN4": RepNCSPELAN4.self, "ELAN1": RepNCSPELAN4.self, "AConv": AConv.self, "ADown": ADown.self,
        "SPPELAN": SPPF.self, "CBLinear": CBLinear.self, "CBFuse": CBFuse.self,
        "nn.Identity": Identity.self, "Silence": Identity.self,
        "SCDown": SCDown.self, "C2fCIB": C2f.self, "PSA": PSA.self,
        "A2C2f": A2C2f.self,
    ]

    /// A node's module: a layer before the head, or the head.
    enum Role: Sendable {
        case layer(any Layer)
        case head(any Head)

        var module: any Module {
            switch self {
            case .layer(let m): m
            case .head(let m): m
            }
        }
    }

    package struct Node: Sendable {
        /// Absolute indices of the layers feeding this one (-1 is the network input).
        package let from: [Int]
        /// The Ultralytics module name, e.g. "C3k2".
        package let type: String
        /// `model.<i>`: its `state_dict` prefix, and its name to observers.
        package let name: String
        /// Output channels.
        package let channels: Int
        /// Input-to-output size ratio (8 means a map of H/8 × W/8).
        package let stride: Int
        let role: Role
        /// Whether it is a `Concat`, whose inputs may write its map in place.
        let concatenates: Bool
        /// The layers whose maps a layer that `splitsUpsampledFront` reads instead of the Concat
        /// before it; that Concat and the Upsample before it are `skipped`: they never run.
        var split: (coarse: Int, rest: Int)? = nil
        var skipped = false
    }

    package let nodes: [Node]
    /// Number of classes.
    package let classCount: Int
    /// Channels of the input image.
    package let inputChannels: Int
    /// What the head does.
    package let task: ModelTask
    /// Layers whose outputs later layers read (other than the next one), with the last layer
    /// that reads each: the output is dropped after it.
    let saved: [Int: Int]

    /// The largest stride: input sides must be multiples of it.
    package var maxStride: Int { nodes.reduce(1) { max($0, $1.stride) } }

    /// Every `Conv` built without an activation of its own gets the spec's `activation`; a row
    /// repeating a module that takes no repeat count builds n copies of it (`Sequential`).
    package init(architecture arch: Architecture, weights: inout some WeightSource, inputChannels: Int = 3) throws {
        let (depth, width, maxChannels) = try arch.multipliers()
        // Ultralytics' parse_model: the heads of graphs without these blocks (YOLOv3 to v9) have
        // plain 3×3 class branches.
        let legacy = !arch.rows.contains { ["C3k2", "A2C2f", "C2fCIB"].contains($0.module) }
        var nodes = [Node]()
        var saved = [Int: Int]()
        let activation = try arch.activation()
        // The rows reading each row, for `upsampledFront`.
        let froms = arch.rows.enumerated().map { i, row in row.from.map { $0 < 0 ? i + $0 : $0 } }
        var readers = [Int: [Int]]()
        for (i, from) in froms.enumerated() { for f in from { readers[f, default: []].append(i) } }
        do {
            for (i, row) in arch.rows.enumerated() {
                func fail(_ reason: String) -> ModelError { .invalidArchitecture(layer: i, reason: reason) }
                let from = froms[i]
                guard !from.isEmpty, from.allSatisfy({ $0 < i && ($0 >= 0 || i == 0) }) else {
                    throw fail("'from' \(row.from) must name earlier layers")
                }
                if i == 0 && from != [-1] { throw fail("the first layer must read the input (from -1)") }
                for f in from where f >= 0 && f != i - 1 { saved[f] = i }
                guard let type = Self.modules[row.module] else { throw ModelError.unknownModule(layer: i, module: row.module) }
                var spec = ModuleSpec(index: i, row: row, architecture: arch, from: from,
                                      inputChannels: from.map { $0 < 0 ? inputChannels : nodes[$0].channels },
                                      inputStrides: from.map { $0 < 0 ? 1 : nodes[$0].stride },
                                      width: width, maxChannels: maxChannels, repeats: scaledRepeats(row.repeats, depth: depth),
                                      legacy: legacy)
                // Upsample, then a Concat of it and one other map, read by this layer alone.
                if i >= 2, from == [i - 1], nodes[i - 1].concatenates, froms[i - 1].count == 2, froms[i - 1][0] == i - 2,
                   froms[i - 1][1] >= 0, froms[i - 2].count == 1, froms[i - 2][0] >= 0,
                   readers[i - 2] == [i - 1], readers[i - 1] == [i], case .layer(let up as Upsample) = nodes[i - 2].role {
                    spec.upsampledFront = UpsampledFront(channels: nodes[i - 2].channels, scale: up.scale)
                }
                let module = try Conv.$defaultActivation.withValue(activation) {
                    try (type.repeatable || spec.repeats == 1 ? type : Sequential.self).init(spec, &weights)
                }
                let role: Role, stride: Int
                if let head = module as? any Head {
                    (role, stride) = (.head(head), spec.inputStrides[0])
                } else if let layer = module as? any Layer {
                    (role, stride) = (.layer(layer), layer.outputStride(spec.inputStrides[0]))
                } else {
                    preconditionFailure("\(row.module) is neither a Layer nor a Head")
                }
                guard stride <= 1 << 16 else { throw fail("the total stride \(stride) is too large") }
                var node = Node(from: from, type: row.module.replacingOccurrences(of: "nn.", with: ""), name: spec.prefix,
                                channels: module.channels, stride: stride, role: role, concatenates: module is Concat)
                if spec.upsampledFront != nil, (module as? any Layer)?.splitsUpsampledFront == true {
                    let (a, b) = (froms[i - 2][0], froms[i - 1][1])
                    node.split = (a, b)
                    nodes[i - 2].skipped = true
                    nodes[i - 1].skipped = true
                    // Their last reader is now this layer.
                    for j in [a, b] { saved[j] = max(saved[j] ?? j + 1, i) }
                }
                nodes.append(node)
            }
        } catch ModelError.invalidArchitecture(layer: -1, let reason) {
            // A block's own checks do not know their layer: the one being built.
            throw ModelError.invalidArchitecture(layer: nodes.count, reason: reason)
        }
        guard case .head(let head)? = nodes.last?.role else {
            throw ModelError.invalidArchitecture(layer: nodes.count - 1, reason: "the last layer must be a head")
        }
        classCount = head.channels
        task = head.task
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
        guard j >= 0 && j + 1 < nodes.count, nodes[j + 1].concatenates, !nodes[j].concatenates else { return false }
        return nodes[j + 1].from[0] == j && !nodes[j + 1].from.dropFirst().contains(j) && saved[j] == nil
    }

    /// The Concat whose map layer j writes from the start, at channel `channel`: an earlier layer
    /// (not the one just before) whose last reader is that Concat, read by it once, so the Concat
    /// copies nothing of it (docs/PERFORMANCE.md has what that saves). Not a Concat itself (its map may
    /// be another's front).
    private func writesConcatBack(_ j: Int) -> (concat: Int, channel: Int)? {
        guard j >= 0, let i = saved[j], nodes[i].concatenates, !nodes[j].concatenates else { return nil }
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

    /// `forward` in a workspace of its own, where `observe(name, output)` sees a copy of the output
    /// of every module that has one of its own, by `state_dict` name, in the order they run: the
    /// top-level layers (`model.10`) and the modules inside them (`model.10.cv1`, `model.10.m.0`,
    /// `model.10.m.0.attn.qkv`, the head's branches). A module whose output is fused with a
    /// residual add (`Bottleneck.cv2`, `PSABlock.attn`) has none of its own.
    package func trace(_ x: Tensor, selection: HeadSelection = HeadSelection(),
                       _ observe: @escaping (String, Tensor) -> Void) throws -> HeadOutput {
        let ws = Workspace()
        ws.observer = { observe($0, Tensor($1)) }
        return try withExtendedLifetime(ws) { HeadOutput(try forward(x, in: ws, selection: selection)) }
    }

    /// Runs the graph on x [1, C, H, W] in `ws`; the results are views into `ws`, valid until
    /// its next pass. `observe(i, output)` sees every top-level layer's output before the head.
    /// `inputRange`: bounds of x's floats when the caller knows them (an int8 graph clamps floats
    /// outside them to its bytes' ends). Its first convolution then skips its range pass; with
    /// 0…1 it maps an image's k/255 to byte k exactly.
    ///
    /// Each layer writes into a map the graph allocates for it (a layer read by the Concat just
    /// after it, into the front of the Concat's map), and an output is released after its last
    /// reader has run.
    ///
    /// `isCancelled` is asked before each layer: true ends the pass with `CancellationError` and
    /// leaves `ws` mid-pass, to be discarded.
    package func forward(_ x: Tensor, in ws: Workspace, selection: HeadSelection = HeadSelection(),
                         inputRange: ValueRange? = nil, observe: ((Int, Map) -> Void)? = nil,
                         isCancelled: (() -> Bool)? = nil) throws -> HeadMaps {
        try validate(input: x)
        return try x.withMap { image in
            let x = image.bounded(by: inputRange)
            ws.begin(layers: nodes.count)
            func input(_ j: Int) -> Map { j < 0 ? x : ws.outputs[j]! }
            /// Releases output j if it owns its block.
            func drop(_ j: Int) {
                if ws.owns[j], let y = ws.outputs[j] { ws.release(y) }
                ws.outputs[j] = nil
            }
            for (i, node) in nodes.enumerated() where !node.skipped {
                if isCancelled?() == true { throw CancellationError() }
                let first = input(node.split?.rest ?? node.from[0])
                let layer: any Layer
                switch node.role {
                case .head(let head):
                    let result = head.forward({ input(node.from[$0]) }, selection: selection, ws)
                    for j in 0..<i { drop(j) }
                    ws.end()
                    return result
                case .layer(let m): layer = m
                }
                let (height, width) = layer.outputSize(height: first.height, width: first.width)
                /// The map this layer writes: its own, or a Concat's front or back (or the Concat's whole
                /// map, placed already when an earlier input writes its back).
                func output() -> Map {
                    if node.concatenates, let placed = ws.outputs[i] { return placed }
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
                // A layer that consumes its input releases it as soon as it has read it, when it is
                // the last reader, and allocates its own output late.
                let j = node.from[0]
                let consuming = node.split == nil && layer.consumesInput && j >= 0 && ws.owns[j] && (saved[j] ?? j + 1) == i
                if consuming { ws.outputs[j] = nil }
                let into = layer.consumesInput && ws.owns[i] ? nil : output()
                let y = node.split.map { layer.forward(coarse: input($0.coarse), rest: first, into: into, ws) }
                    ?? layer.forward({ $0 == 0 ? first : input(node.from[$0]) }, into: into, consuming: consuming, ws)
                observe?(i, y)
                ws.observe(node.name, y)
                ws.outputs[i] = y
                func dropRead(_ j: Int) { if j >= 0 && ws.outputs[j] != nil && (saved[j] ?? j + 1) == i { drop(j) } }
                for j in node.from { dropRead(j) }
                if let (coarse, rest) = node.split { dropRead(coarse); dropRead(rest) }
                if saved[i] == nil && !nodes[i + 1].from.contains(i) { drop(i) }
            }
            preconditionFailure("a Network always ends in its head")
        }
    }
}

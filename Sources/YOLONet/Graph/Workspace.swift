import Tensor

/// The memory of forward passes, run one at a time: every activation and the head's results in
/// one arena, the kernels' temporaries in a `Scratch`.
///
/// A pass at a given input size (and head selection) asks for the same blocks, of the same
/// sizes, in the same order and for the same spans each time. The first pass takes its blocks
/// from the heap and records them; its end plans their offsets in the arena by lifetime
/// (`replan`: each at the lowest offset free for its whole span), and the next pass starts with
/// an arena of the plan's size. A pass follows the plan while its history, allocation by
/// allocation and release by release, is the plan's; one that departs from it (another input
/// size) finishes on the heap and is planned in turn. Passes that follow the plan allocate
/// nothing (`AllocationTests`).
///
/// Not `Sendable`: one task at a time uses a workspace (`YOLO` keeps a pool of them).
package final class Workspace {
    /// A block of a pass: its size in floats (a multiple of 16: 64 bytes), its span on the
    /// pass's clock (one tick per allocation and release), where it lies.
    private struct Block {
        var count: Int, start: Int, end: Int
        var base: UnsafeMutablePointer<Float>
        /// From the heap (not yet planned).
        var onHeap: Bool
    }

    let scratch = Scratch()
    private var arena: UnsafeMutablePointer<Float>?
    private var capacity = 0
    /// The blocks of this pass, in allocation order; `plan` gives the sizes, spans and offsets
    /// of the last planned pass's, which this pass follows while its history (every allocation
    /// and release, tick by tick) is the plan's.
    private var blocks: [Block] = []
    private var plan: [(count: Int, start: Int, end: Int, offset: Int)] = []
    private var following = false
    /// The arena the plan needs: it grows at the next pass's start (the results of the pass
    /// that planned it may lie in the present one).
    private var planned = 0
    private var clock = 0
    /// Blocks kept as results: in use when the pass ends, valid until the next one.
    private var kept = 0
    /// Per layer: its output while a later layer still reads it, and whether it owns its block
    /// (a layer writing into a Concat's block does not; that block waits in the Concat's slot
    /// when an earlier layer writes its back).
    var outputs: [Map?] = []
    var owns: [Bool] = []
    /// Sees the outputs of modules inside the layers during a pass, by `state_dict` name.
    var observer: ((String, Map) -> Void)?
    /// Growable buffers of the head's index tables, by use.
    private var buffers: [UnsafeMutableRawPointer?] = []
    private var bufferBytes: [Int] = []

    package init() {}

    /// Bytes of the arena the last planned pass needs, and of the kernels' largest temporaries.
    package var plannedBytes: Int { planned * MemoryLayout<Float>.stride + scratch.bytes }

    deinit {
        Memory.deallocate(arena)
        for block in blocks where block.onHeap && block.end == Int.max { block.base.deallocate() }
        for buffer in buffers { buffer?.deallocate() }
    }

    /// Starts a pass of a graph of `layers` layers.
    func begin(layers: Int) {
        // The last pass's results that came from the heap; then its other heap blocks' pages,
        // freed into the heap, go back to the kernel.
        var freed = false
        for block in blocks where block.onHeap && block.end == Int.max {
            block.base.deallocate()
            freed = true
        }
        if freed { Memory.returnFreePages() }
        blocks.removeAll(keepingCapacity: true)
        if planned > capacity {
            Memory.deallocate(arena)
            capacity = planned
            arena = Memory.allocate(bytes: capacity * MemoryLayout<Float>.stride).bindMemory(to: Float.self, capacity: capacity)
        }
        clock = 0
        kept = 0
        following = !plan.isEmpty
        if outputs.count != layers {
            outputs = Array(repeating: nil, count: layers)
            owns = Array(repeating: false, count: layers)
        }
    }

    /// Ends a pass: every block but the kept results must have been released. The results stay
    /// where they are until the next pass. A pass that did not follow the plan is planned.
    func end() {
        let inUse = blocks.reduce(0) { $0 + ($1.end == Int.max ? 1 : 0) }
        precondition(inUse == kept, "\(inUse - kept) activation blocks still in use after a forward pass")
        for i in outputs.indices { outputs[i] = nil }
        if following && blocks.count == plan.count
            && blocks.indices.allSatisfy({ (blocks[$0].end == Int.max ? clock + 1 : blocks[$0].end) == plan[$0].end }) {
            return
        }
        replan()
    }

    /// An uninitialized [channels, height, width] map, until `release`.
    func map(channels: Int, height: Int, width: Int) -> Map {
        let count = (channels * height * width + 15) / 16 * 16, i = blocks.count
        clock += 1
        if following && (i >= plan.count || plan[i].count != count || plan[i].start != clock) { following = false }
        let block = following
            ? Block(count: count, start: clock, end: Int.max, base: arena! + plan[i].offset, onHeap: false)
            : Block(count: count, start: clock, end: Int.max, base: .allocate(capacity: count), onHeap: true)
        blocks.append(block)
        return Map(block.base, channels: channels, height: height, width: width)
    }

    /// A map the size of `x` with `channels` channels.
    func map(channels: Int, like x: Map) -> Map { map(channels: channels, height: x.height, width: x.width) }

    /// A map of the pass's results: in use until the pass ends, its contents kept until the next.
    func result(channels: Int, height: Int, width: Int) -> Map {
        kept += 1
        return map(channels: channels, height: height, width: width)
    }

    /// Returns the block `map` starts (a map from `map(…)`, not a slice of one).
    func release(_ map: Map) {
        guard let i = blocks.lastIndex(where: { $0.base == map.base && $0.end == Int.max }) else {
            preconditionFailure("release: not a block of this workspace in use")
        }
        clock += 1
        blocks[i].end = clock
        if blocks[i].onHeap {
            blocks[i].base.deallocate()
        } else if plan[i].end != clock {
            // Released off the plan: later blocks could overlap this one.
            following = false
        }
    }

    /// Offsets for this pass's blocks: each, in some order, at the lowest offset where it
    /// overlaps no placed block whose span meets its own. The order starts as largest size ×
    /// span first and is improved by swapping two blocks while that does not grow the arena,
    /// until it is as small as the peak of live blocks (no plan can be smaller) or 500 swaps
    /// have been tried (a pseudo-random sequence, the same every time). docs/PERFORMANCE.md has the
    /// sizes this gives.
    private func replan() {
        let spans = blocks.map { (count: $0.count, start: $0.start, end: $0.end == Int.max ? clock + 1 : $0.end) }
        func layout(_ order: [Int]) -> (offsets: [Int], size: Int) {
            var offsets = [Int](repeating: 0, count: spans.count), placed = [Int](), size = 0
            for i in order {
                let conflicts = placed.filter { spans[$0].start < spans[i].end && spans[i].start < spans[$0].end }
                    .sorted { offsets[$0] < offsets[$1] }
                var offset = 0
                for j in conflicts where offsets[j] < offset + spans[i].count {
                    offset = max(offset, offsets[j] + spans[j].count)
                }
                offsets[i] = offset
                placed.append(i)
                size = max(size, offset + spans[i].count)
            }
            return (offsets, size)
        }
        var live = [Int](repeating: 0, count: clock + 2)
        for span in spans { for t in span.start..<span.end { live[t] += span.count } }
        let bound = live.max() ?? 0
        var order = spans.indices.sorted { spans[$0].count * (spans[$0].end - spans[$0].start) > spans[$1].count * (spans[$1].end - spans[$1].start) }
        var best = layout(order), seed: UInt64 = 0x9E37_79B9_7F4A_7C15
        for _ in 0..<500 where best.size > bound && order.count > 1 {
            seed = seed &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            var next = order
            next.swapAt(Int((seed >> 33) % UInt64(order.count)), Int((seed >> 11) % UInt64(order.count)))
            let candidate = layout(next)
            if candidate.size <= best.size { (best, order) = (candidate, next) }
        }
        plan = zip(spans, best.offsets).map { ($0.count, $0.start, $0.end, $1) }
        planned = best.size
    }

    /// Shows the observer, if any, the output of the module `name`.
    func observe(_ name: String, _ map: Map) { observer?(name, map) }

    /// Buffer `slot` with room for `count` values of `type`, kept from pass to pass (contents
    /// are not): the head's index tables.
    func buffer<T>(_ slot: Int, _ type: T.Type, count: Int) -> UnsafeMutablePointer<T> {
        while buffers.count <= slot {
            buffers.append(nil)
            bufferBytes.append(0)
        }
        let bytes = max(1, count) * MemoryLayout<T>.stride
        if bytes > bufferBytes[slot] {
            buffers[slot]?.deallocate()
            buffers[slot] = .allocate(byteCount: bytes, alignment: 64)
            bufferBytes[slot] = bytes
        }
        return buffers[slot]!.bindMemory(to: T.self, capacity: count)
    }
}

extension Network {
    /// Bytes a pass on a height × width input needs, estimated without allocating them:
    /// `bytesPerPixel` (a pass's activations and kernel temporaries measured at a small size,
    /// over its pixel count: they grow with the pixel count) × pixels, plus the attention
    /// scores, (positions / areas)² floats, which grow with its square.
    package func estimatedBytes(height: Int, width: Int, bytesPerPixel: Double) -> Double {
        let positions = nodes.filter { $0.role.module.hasAttention }
            .map { Double((height / $0.stride) * (width / $0.stride) / $0.role.module.attentionAreas) }.max() ?? 0
        return bytesPerPixel * Double(height * width) + Double(MemoryLayout<Float>.stride) * positions * positions
    }

    /// `bytesPerPixel` for `estimatedBytes`, from one pass on a (4 · maxStride)² input.
    package func measureBytesPerPixel() throws -> Double {
        let side = 4 * maxStride, ws = Workspace()
        _ = try forward(Tensor(zeros: [1, inputChannels, side, side]), in: ws)
        return Double(ws.plannedBytes) / Double(side * side)
    }
}

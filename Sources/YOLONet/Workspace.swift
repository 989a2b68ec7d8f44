import Tensor

/// The memory of forward passes, run one at a time: every activation and the head's results in
/// one arena, the kernels' temporaries in a `Scratch`.
///
/// A pass at a given input size asks for the same blocks in the same order each time, so
/// first-fit places each at the same offset every time. Offsets are planned as if the arena
/// were unbounded: a block past its end comes from the heap for that pass only, and the next
/// pass starts with an arena as large as the last one needed. From the second pass at an input
/// size on, a forward pass allocates nothing (`AllocationTests`).
///
/// Not `Sendable`: one task at a time uses a workspace (`YOLO` keeps a pool of them).
package final class Workspace {
    let scratch = Scratch()
    private var arena: UnsafeMutablePointer<Float>?
    private var capacity = 0
    /// The end of the highest block of this pass, in floats from the arena's start.
    private var needed = 0
    /// Blocks in use, sorted by offset (floats, rounded up to 64 bytes).
    private var live: [(offset: Int, count: Int)] = []
    /// Blocks kept as results: still in use when the pass ends, valid until the next one.
    private var kept = 0
    /// Blocks in use that lie past the arena's end (from the heap until released), by offset.
    private var overflow: [(offset: Int, pointer: UnsafeMutablePointer<Float>)] = []
    /// Per layer: its output while a later layer still reads it, and whether it owns its block
    /// (a layer writing into the front of a Concat's block does not).
    var outputs: [Map?] = []
    var owns: [Bool] = []
    /// Growable buffers of the head's index tables, by use.
    private var buffers: [UnsafeMutableRawPointer?] = []
    private var bufferBytes: [Int] = []

    package init() {
        live.reserveCapacity(256)
    }

    deinit {
        arena?.deallocate()
        for block in overflow { block.pointer.deallocate() }
        for buffer in buffers { buffer?.deallocate() }
    }

    /// Starts a pass of a graph of `layers` layers: the arena grows to what the last pass needed.
    func begin(layers: Int) {
        precondition(live.isEmpty, "a workspace runs one forward pass at a time")
        // The last pass's results past the arena.
        for block in overflow { block.pointer.deallocate() }
        overflow.removeAll(keepingCapacity: true)
        if needed > capacity {
            arena?.deallocate()
            Memory.returnFreePages()
            capacity = needed
            arena = .allocate(capacity: capacity)
        }
        needed = 0
        if outputs.count != layers {
            outputs = Array(repeating: nil, count: layers)
            owns = Array(repeating: false, count: layers)
        }
    }

    /// Ends a pass: every block but the kept results must have been released. The results stay
    /// where they are until the next pass.
    func end() {
        precondition(live.count == kept, "\(live.count - kept) activation blocks still in use after a forward pass")
        live.removeAll(keepingCapacity: true)
        kept = 0
        for i in outputs.indices { outputs[i] = nil }
    }

    /// A map of the pass's results: in use until the pass ends, its contents kept until the next.
    func result(channels: Int, height: Int, width: Int) -> Map {
        kept += 1
        return map(channels: channels, height: height, width: width)
    }

    /// An uninitialized [channels, height, width] map, until `release`.
    func map(channels: Int, height: Int, width: Int) -> Map {
        let count = (channels * height * width + 15) / 16 * 16
        // First fit: the lowest gap between live blocks that holds `count`.
        var offset = 0, index = 0
        while index < live.count && live[index].offset - offset < count {
            offset = live[index].offset + live[index].count
            index += 1
        }
        live.insert((offset, count), at: index)
        needed = max(needed, offset + count)
        let base: UnsafeMutablePointer<Float>
        if offset + count <= capacity, let arena {
            base = arena + offset
        } else {
            base = .allocate(capacity: count)
            overflow.append((offset, base))
        }
        return Map(base, channels: channels, height: height, width: width)
    }

    /// Bytes of the arena (what the last pass at the largest input size needed).
    package var arenaBytes: Int { max(capacity, needed) * MemoryLayout<Float>.stride }

    /// A map the size of `x` with `channels` channels.
    func map(channels: Int, like x: Map) -> Map { map(channels: channels, height: x.height, width: x.width) }

    /// Returns the block `map` starts (a map from `map(…)`, not a slice of one).
    func release(_ map: Map) {
        let offset: Int
        if let arena, map.base >= arena && map.base < arena + capacity {
            offset = map.base - arena
        } else {
            guard let index = overflow.firstIndex(where: { $0.pointer == map.base }) else {
                preconditionFailure("release: not a block of this workspace")
            }
            offset = overflow[index].offset
            overflow.remove(at: index).pointer.deallocate()
        }
        guard let index = live.firstIndex(where: { $0.offset == offset }) else {
            preconditionFailure("release: block at \(offset) is not in use")
        }
        live.remove(at: index)
    }

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

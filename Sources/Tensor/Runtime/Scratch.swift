/// Kernels' temporaries (phase planes, offset tables, packed panels), for one kernel call at a
/// time: grown when a call needs more than the last (the first pass at an input size), so
/// passes after it allocate nothing.
package final class Scratch {
    private var storage: UnsafeMutableRawPointer?
    /// The size of the largest request so far.
    package private(set) var bytes = 0

    package init() {}
    deinit { Memory.deallocate(storage) }

    /// `floats` floats, then `ints` Ints; valid until the next call (their contents are not kept).
    package func take(floats: Int, ints: Int = 0) -> (floats: UnsafeMutablePointer<Float>, ints: UnsafeMutablePointer<Int>) {
        let intOffset = (floats * MemoryLayout<Float>.stride + 63) / 64 * 64
        let needed = max(64, intOffset + ints * MemoryLayout<Int>.stride)
        if needed > bytes {
            Memory.deallocate(storage)
            bytes = needed
            storage = Memory.allocate(bytes: bytes)
        }
        let base = storage!
        return (base.bindMemory(to: Float.self, capacity: floats),
                (base + intOffset).bindMemory(to: Int.self, capacity: ints))
    }
}

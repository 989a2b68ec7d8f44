import Foundation

/// The process's heap.
package enum Memory {
    /// Returns the heap's free pages to the kernel (glibc's `malloc_trim`; malloc.h is not in
    /// Swift's Glibc module). A workspace calls it after a pass that ran on the heap (the pass
    /// that plans its arena): glibc would otherwise keep that pass's freed blocks.
    package static func returnFreePages() {
        typealias MallocTrim = @convention(c) (Int) -> Int32
        // RTLD_DEFAULT.
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "malloc_trim") else { return }
        _ = unsafeBitCast(symbol, to: MallocTrim.self)(0)
    }
}

/// Kernels' temporaries (phase planes, offset tables, packed panels), for one kernel call at a
/// time: grown when a call needs more than the last (the first pass at an input size), so
/// passes after it allocate nothing.
package final class Scratch {
    private var storage: UnsafeMutableRawPointer?
    /// The size of the largest request so far.
    package private(set) var bytes = 0

    package init() {}
    deinit { storage?.deallocate() }

    /// `floats` floats, then `ints` Ints; valid until the next call (their contents are not kept).
    package func take(floats: Int, ints: Int = 0) -> (floats: UnsafeMutablePointer<Float>, ints: UnsafeMutablePointer<Int>) {
        let intOffset = (floats * MemoryLayout<Float>.stride + 63) / 64 * 64
        let needed = max(64, intOffset + ints * MemoryLayout<Int>.stride)
        if needed > bytes {
            storage?.deallocate()
            bytes = needed
            storage = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        }
        let base = storage!
        return (base.bindMemory(to: Float.self, capacity: floats),
                (base + intOffset).bindMemory(to: Int.self, capacity: ints))
    }
}

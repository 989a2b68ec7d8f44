import Foundation

/// glibc's malloc policy for a process running inferences.
///
/// Tensors are Swift arrays, so each layer's output is a fresh allocation of up to tens of MB.
/// By default glibc adapts its mmap threshold to the largest block freed so far and trims the
/// heap top above twice that: with this network's mix of sizes it kept returning pages to the
/// kernel and faulting them back in, 20 ms of a 75 ms yolo26n inference (1 thread; 55 ms with
/// the thresholds below, 47 → 30 ms on 2 threads). Fixed thresholds (blocks under 32 MB from
/// the heap, trim above 128 MB free) keep the pages, for tensors and kernels' temporaries
/// alike. Peak RSS was unchanged (89 MB).
enum Memory {
    /// Applied once per process, when OpenBLAS is loaded.
    static let keepFreedPages: Void = {
        typealias Mallopt = @convention(c) (Int32, Int32) -> Int32
        // RTLD_DEFAULT; mallopt is glibc's (malloc.h is not in Swift's Glibc module).
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "mallopt") else { return }
        let mallopt = unsafeBitCast(symbol, to: Mallopt.self)
        let (trimThreshold, mmapThreshold): (Int32, Int32) = (-1, -3)  // M_TRIM_THRESHOLD, M_MMAP_THRESHOLD
        _ = mallopt(mmapThreshold, 32 << 20)
        _ = mallopt(trimThreshold, 128 << 20)
    }()
}

/// Kernels' temporaries (phase planes, offset tables, packed panels), for one kernel call at a
/// time: grown when a call needs more than the last (the first pass at an input size), so
/// passes after it allocate nothing.
package final class Scratch {
    private var storage: UnsafeMutableRawPointer?
    private var bytes = 0

    package init() {}
    deinit { storage?.deallocate() }

    /// `floats` floats, then `ints` Ints; valid until the next call (their contents are not kept).
    package func take(floats: Int, ints: Int = 0) -> (floats: UnsafeMutablePointer<Float>, ints: UnsafeMutablePointer<Int>) {
        let intOffset = (floats * MemoryLayout<Float>.stride + 63) / 64 * 64
        let needed = max(64, intOffset + ints * MemoryLayout<Int>.stride)
        if needed > bytes {
            storage?.deallocate()
            bytes = max(needed, bytes * 5 / 4)
            storage = UnsafeMutableRawPointer.allocate(byteCount: bytes, alignment: 64)
        }
        let base = storage!
        return (base.bindMemory(to: Float.self, capacity: floats),
                (base + intOffset).bindMemory(to: Int.self, capacity: ints))
    }
}

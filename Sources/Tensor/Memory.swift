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

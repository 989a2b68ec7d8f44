import Foundation

/// The process's heap.
package enum Memory {
    /// Memory for a buffer that kernels stream through every pass (a workspace's arena, the
    /// kernels' scratch), freed by `deallocate`: from 2 MB, whole 2 MB pages, aligned and advised
    /// for transparent huge pages (where the kernel allows them only on request), so that a few
    /// TLB entries cover what took one per 4 KB; below, 64-byte aligned.
    package static func allocate(bytes: Int) -> UnsafeMutableRawPointer {
        let page = 1 << 21, huge = bytes >= page
        let size = huge ? (bytes + page - 1) / page * page : max(bytes, 1)
        var p: UnsafeMutableRawPointer?
        guard posix_memalign(&p, huge ? page : 64, size) == 0, let p else {
            fatalError("out of memory: \(size) bytes")
        }
        if huge { _ = madvise(p, size, MADV_HUGEPAGE) }
        return p
    }

    /// Frees memory from `allocate(bytes:)`.
    package static func deallocate(_ p: UnsafeMutableRawPointer?) { free(p) }

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

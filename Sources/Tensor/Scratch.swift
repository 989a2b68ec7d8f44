import Synchronization

/// Reusable buffers for kernels' temporaries (a convolution's phase planes and staging
/// output). A buffer goes back to the pool after use and the next request it is large enough
/// for takes it, so after the first inference these temporaries cost no allocation and no
/// page faults (fresh pages of a new buffer were measured at several ms per inference).
enum Scratch {
    private struct Buffer: Sendable {
        let bits: Int
        let capacity: Int
    }

    private static let free = Mutex<[Buffer]>([])

    /// Runs `body` with a buffer of at least `count` uninitialized floats.
    static func withBuffer<R>(_ count: Int, _ body: (UnsafeMutablePointer<Float>) -> R) -> R {
        let buffer = take(count)
        defer { free.withLock { $0.append(buffer) } }
        return body(UnsafeMutablePointer(bitPattern: buffer.bits)!)
    }

    /// The smallest free buffer that fits; else the largest is replaced by one of `count`, so
    /// the pool holds no more buffers than were ever in use at once.
    private static func take(_ count: Int) -> Buffer {
        let (fit, replaced) = free.withLock { buffers -> (Buffer?, Buffer?) in
            var best: Int?, largest: Int?
            for (i, b) in buffers.enumerated() {
                if b.capacity >= count && (best == nil || b.capacity < buffers[best!].capacity) { best = i }
                if largest == nil || b.capacity > buffers[largest!].capacity { largest = i }
            }
            if let best { return (buffers.remove(at: best), nil) }
            return (nil, largest.map { buffers.remove(at: $0) })
        }
        if let fit { return fit }
        if let replaced { UnsafeMutablePointer<Float>(bitPattern: replaced.bits)!.deallocate() }
        return Buffer(bits: Int(bitPattern: UnsafeMutablePointer<Float>.allocate(capacity: max(count, 1))), capacity: max(count, 1))
    }
}

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

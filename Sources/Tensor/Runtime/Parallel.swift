import Foundation
import Synchronization

/// How our kernels split work over threads, and how many they use.
///
/// Every multi-threaded region is ours: OpenBLAS, where a layer uses it (`BLAS.sgemm`), runs on
/// the calling thread inside our split, so a GEMM and the kernels around it share one count and
/// the cores are never oversubscribed.
public enum Parallel {
    /// The count set through `width`, 0 until then.
    private static let configured = Atomic<Int>(0)

    /// The count `withWidth` gives the kernels it runs, nil outside it.
    @TaskLocal private static var scoped: Int?

    /// Threads a kernel may use (≥ 1): inside `withWidth`, its count; else as last set (values
    /// below 1 set 1), else `defaultWidth`.
    public static var width: Int {
        get {
            if let scoped { return scoped }
            let w = configured.load(ordering: .relaxed)
            return w > 0 ? w : defaultWidth
        }
        set { configured.store(max(1, newValue), ordering: .relaxed) }
    }

    /// Runs `body` with `width` = `threads` (at least 1) for the kernels it calls, on its own
    /// thread or task only: a model's configured count leaves other models and the process's
    /// count alone. nil runs `body` with `width` as it is.
    public static func withWidth<R>(_ threads: Int?, _ body: () throws -> R) rethrows -> R {
        guard let threads else { return try body() }
        return try $scoped.withValue(max(1, threads), operation: body)
    }

    /// `width` until set: one per core the process may run on.
    public static let defaultWidth = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// Runs `work.run(part: i, thread: t)` for every i in 0..<count on at most `threads` threads
    /// (`width` unless given; t: 0 for the caller, which runs parts too, then 1, 2, … below
    /// `threads`), concurrently when count > 1; returns when all are done. Threads claim parts as
    /// they come free, so a thread the system stalls takes fewer: a kernel cut into more parts
    /// than threads keeps per-thread temporaries by `thread`. A call made while another is in
    /// progress (from another thread, or from inside a part) runs serially on its own thread (t = 0).
    static func forEach<Work: ParallelWork>(_ count: Int, threads: Int = width, _ work: Work) {
        if count == 1 || threads == 1 {
            for i in 0..<count { work.run(part: i, thread: 0) }
        } else if count > 1 {
            WorkerPool.shared.run(count, threads: threads, work)
        }
    }

    /// 0..<total in at most `parts` contiguous ranges, each starting at a multiple of `align`
    /// (the last takes the rest); fewer parts when there is too little work for them.
    static func ranges(_ total: Int, parts: Int, align: Int = 1) -> Partition {
        Partition(total: total, parts: parts, align: align)
    }
}

/// A kernel's parallel region: what its parts share, and how part i runs on thread t. A value,
/// not a closure: the workers reach it through its address on the caller's stack, where a
/// closure would have to be boxed on the heap (`withoutActuallyEscaping` does that once per
/// region).
protocol ParallelWork: Sendable {
    func run(part: Int, thread: Int)
}

extension ParallelWork {
    /// `run(part:thread:)` of the work at `work`: a plain function, whatever the type.
    fileprivate static func run(_ work: UnsafeRawPointer, part: Int, thread: Int) {
        work.assumingMemoryBound(to: Self.self).pointee.run(part: part, thread: thread)
    }
}

/// `Parallel.ranges`: computed on demand, so a kernel splitting its work allocates nothing.
struct Partition: Sendable {
    let total: Int, units: Int, align: Int
    /// Number of ranges.
    let count: Int

    init(total: Int, parts: Int, align: Int) {
        (self.total, self.align) = (total, align)
        units = (total + align - 1) / align
        count = max(1, min(parts, units))
    }

    subscript(i: Int) -> Range<Int> {
        min(total, i * units / count * align)..<min(total, (i + 1) * units / count * align)
    }
}

/// A buffer address carried into a concurrent region (pointers are not `Sendable`); each
/// task writes only its own part of the buffer (or only reads it, for tables of offsets).
struct Address<Pointee>: Sendable {
    let bits: Int
    init(_ p: UnsafePointer<Pointee>) { bits = Int(bitPattern: p) }
    init(_ p: UnsafeMutablePointer<Pointee>) { bits = Int(bitPattern: p) }
    var pointer: UnsafeMutablePointer<Pointee> { UnsafeMutablePointer(bitPattern: bits)! }
}

/// Worker threads that spin briefly (tens of µs) after a job (the next kernel usually follows within
/// microseconds), then sleep on a condition: `DispatchQueue.concurrentPerform`'s workers wake too
/// late for kernels this short, and run two short parts one after the other.
final class WorkerPool: Sendable {
    static let shared = WorkerPool(workers: max(1, ProcessInfo.processInfo.activeProcessorCount - 1))

    /// A job: `count` parts of the work at `work` (on the stack of the `run` call), run by `run`
    /// on threads numbered below `threads`.
    private struct Job {
        let work: UnsafeRawPointer
        let run: (UnsafeRawPointer, Int, Int) -> Void
        let count: Int, threads: Int
    }

    /// The address of the job in progress, 0 between jobs.
    private let current = Atomic<Int>(0)
    /// Parts claimed and parts finished of the job in progress.
    private let next = Atomic<Int>(0), done = Atomic<Int>(0)
    /// Workers that may be reading the current job: `run` returns only when none is.
    private let holding = Atomic<Int>(0)
    private let generation = Atomic<Int>(0)
    private let busy = Atomic<Bool>(false)
    private let wakeup = NSCondition()
    /// Atomic loads a worker spins through before it sleeps (tens of µs).
    private let spinLimit = 200_000

    private init(workers: Int) {
        for id in 1...workers {
            let thread = Thread { [self] in loop(thread: id) }
            thread.name = "yolo-worker"
            thread.start()
        }
    }

    func run<Work: ParallelWork>(_ count: Int, threads: Int, _ work: Work) {
        guard busy.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else {
            for i in 0..<count { work.run(part: i, thread: 0) }
            return
        }
        defer { busy.store(false, ordering: .releasing) }
        withUnsafePointer(to: work) { work in
            var job = Job(work: UnsafeRawPointer(work), run: Work.run, count: count, threads: threads)
            withUnsafePointer(to: &job) { job in
                next.store(0, ordering: .relaxed)
                done.store(0, ordering: .relaxed)
                current.store(Int(bitPattern: job), ordering: .sequentiallyConsistent)
                wakeup.lock()
                generation.add(1, ordering: .releasing)
                wakeup.broadcast()
                wakeup.unlock()
                self.work(job, thread: 0)
                while done.load(ordering: .acquiring) < count {}
                current.store(0, ordering: .sequentiallyConsistent)
                // A worker that counted itself in before this load may still read the job.
                while holding.load(ordering: .sequentiallyConsistent) > 0 {}
            }
        }
    }

    /// Claims and runs parts until none is left.
    private func work(_ job: UnsafePointer<Job>, thread: Int) {
        while true {
            let i = next.wrappingAdd(1, ordering: .relaxed).oldValue
            guard i < job.pointee.count else { return }
            job.pointee.run(job.pointee.work, i, thread)
            done.add(1, ordering: .releasing)
        }
    }

    private func loop(thread: Int) {
        var seen = 0
        while true {
            var spins = 0
            while generation.load(ordering: .acquiring) == seen {
                spins += 1
                if spins >= spinLimit {
                    wakeup.lock()
                    while generation.load(ordering: .acquiring) == seen { wakeup.wait() }
                    wakeup.unlock()
                }
            }
            seen = generation.load(ordering: .acquiring)
            holding.add(1, ordering: .sequentiallyConsistent)
            if let job = UnsafePointer<Job>(bitPattern: current.load(ordering: .sequentiallyConsistent)),
               thread < job.pointee.threads {
                work(job, thread: thread)
            }
            holding.subtract(1, ordering: .releasing)
        }
    }
}

import AllocationCounter
import Foundation
import Tensor
import TestSupport
import XCTest
import YOLONet

/// A forward pass in a workspace that has run at the input size (twice: the first pass plans
/// the arena, the second allocates it) makes no heap allocation, on every task's head and on
/// one and two threads.
final class AllocationTests: XCTestCase {
    func testForwardAllocatesNothingAfterWarmUp() throws {
        try XCTSkipUnless(allocation_counter_available() != 0, "a sanitizer build counts no allocations (scripts/sanitize)")
        try BLAS.load()
        let saved = Parallel.width
        defer { Parallel.width = saved }
        // The counter sees every allocation in the process: it must see this one.
        allocation_counter_start()
        let probe = [Float](repeating: 1, count: 1 + Int.random(in: 0...1))
        XCTAssertGreaterThan(allocation_counter_stop(), 0, "the allocation counter counts (\(probe.count))")
        for name in ["yolo26n", "yolo26n-seg", "yolo26n-pose", "yolo26n-obb", "yolo26n-cls", "yolo11n"] {
            let model = try Model(contentsOf: weightsFile(name))
            let side = name.hasSuffix("-cls") ? 224 : 320
            let x = Tensor(shape: [1, 3, side, side], scalars: (0..<(3 * side * side)).map { Float($0 % 251) / 251 })
            for threads in [1, 2] {
                Parallel.width = threads
                let ws = Workspace()
                for _ in 0..<2 { _ = try model.network.forward(x, in: ws) }
                // The counter also sees other threads of the test process (another test's task
                // finishing late): a pass allocates the same every time, so the fewest of three
                // passes is what a pass allocates.
                var counts = [UInt64]()
                for _ in 0..<3 {
                    allocation_counter_start()
                    let head = try model.network.forward(x, in: ws)
                    counts.append(allocation_counter_stop())
                    XCTAssertGreaterThan(head.output.count, 0, name)
                }
                XCTAssertEqual(counts.min(), 0, "\(name), \(threads) threads: heap allocations in forward passes \(counts)")
            }
        }
    }
}

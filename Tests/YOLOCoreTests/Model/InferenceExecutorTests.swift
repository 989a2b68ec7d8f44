import Dispatch
import Foundation
import Synchronization
import TestSupport
import XCTest
import YOLOCore

/// Predictions run on the executor's own threads, at most one per core at once, and a cancelled
/// caller stops its pass.
final class InferenceExecutorTests: XCTestCase {
    /// A value shared by the jobs and the test.
    private final class Shared<Value: Sendable>: Sendable {
        let value: Mutex<Value>
        init(_ value: Value) { self.value = Mutex(value) }
        func callAsFunction<R: Sendable>(_ body: (inout sending Value) -> sending R) -> R { value.withLock(body) }
    }

    /// Six jobs on a two-thread executor: never more than two at once, started in the order they
    /// were submitted.
    func testJobsRunOnItsThreadsAtMostWidthAtOnce() async throws {
        let executor = InferenceExecutor(width: 2)
        let state = Shared((running: 0, most: 0, order: [Int]()))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<6 {
                group.addTask {
                    try await executor.run { _ in
                        state {
                            $0.running += 1
                            $0.most = max($0.most, $0.running)
                            $0.order.append(i)
                        }
                        usleep(30_000)
                        state { $0.running -= 1 }
                    }
                }
                // Submitted one after another, so the start order is defined.
                try await Task.sleep(for: .milliseconds(2))
            }
            try await group.waitForAll()
        }
        state {
            XCTAssertEqual($0.most, 2)
            XCTAssertEqual($0.order, Array(0..<6))
        }
    }

    /// With every executor thread blocked in a job, as many as the cooperative pool has threads,
    /// the pool still runs tasks: the jobs are not on it. (On the pool, the tasks below would
    /// wait for the jobs' 20 s timeout.)
    func testBlockedJobsLeaveTheCooperativePoolFree() async throws {
        let width = ProcessInfo.processInfo.activeProcessorCount
        let executor = InferenceExecutor(width: width)
        let release = DispatchSemaphore(value: 0)
        let started = Shared(0)
        let jobs = Task {
            try await withThrowingTaskGroup(of: Void.self) { group in
                for _ in 0..<width {
                    group.addTask {
                        try await executor.run { _ in
                            started { $0 += 1 }
                            _ = release.wait(timeout: .now() + 20)
                        }
                    }
                }
                try await group.waitForAll()
            }
        }
        let start = Date()
        while started({ $0 }) < width { try await Task.sleep(for: .milliseconds(1)) }
        let sum = await withTaskGroup(of: Int.self) { group in
            for i in 0..<(4 * width) {
                group.addTask {
                    await Task.yield()
                    return i
                }
            }
            return await group.reduce(0, +)
        }
        XCTAssertEqual(sum, (0..<(4 * width)).reduce(0, +))
        XCTAssertLessThan(Date().timeIntervalSince(start), 10, "the pool waited for the jobs")
        for _ in 0..<width { release.signal() }
        try await jobs.value
    }

    /// A job whose task is cancelled while it runs sees the flag, and the caller gets
    /// `CancellationError`; a task cancelled before it submits never runs its job.
    func testCancellationReachesTheJob() async throws {
        let executor = InferenceExecutor(width: 1)
        let started = Shared(false)
        let task = Task {
            try await executor.run { cancellation in
                started { $0 = true }
                while !cancellation.isCancelled { usleep(1000) }
                try cancellation.check()
                return 1
            }
        }
        while !started({ $0 }) { try await Task.sleep(for: .milliseconds(1)) }
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("expected CancellationError")
        } catch is CancellationError {}

        let ran = Shared(false)
        let cancelled = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            return try await executor.run { _ in ran { $0 = true } }
        }
        do {
            try await cancelled.value
            XCTFail("expected CancellationError")
        } catch is CancellationError {}
        XCTAssertFalse(ran { $0 })
    }

    /// A prediction cancelled mid-pass throws `CancellationError`, and the model's next
    /// predictions are exactly those of a model that never saw it (the cut pass's workspace is
    /// dropped, not reused).
    func testCancelledPredictionLeavesTheModelIntact() async throws {
        let model = try YOLO(contentsOf: weightsFile("yolo26n"))
        let image = try Image(contentsOf: sharedFile("images/bus.jpg"))
        let expected = try await model.predict(image).boxes
        var cancelledOnce = false
        for attempt in 0..<20 where !cancelledOnce {
            let task = Task { try await model.predict(image) }
            // A pass takes tens of milliseconds: cancel at staggered points within it.
            try await Task.sleep(for: .milliseconds(attempt))
            task.cancel()
            do { _ = try await task.value } catch is CancellationError { cancelledOnce = true }
        }
        XCTAssertTrue(cancelledOnce, "no prediction was cancelled")
        let again = try await model.predict(image).boxes
        XCTAssertEqual(again.map(\.xyxy), expected.map(\.xyxy))
        XCTAssertEqual(again.map(\.conf), expected.map(\.conf))
    }
}

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

    /// The calling thread's name as the kernel has it.
    private static func threadName() -> String {
        var name = [CChar](repeating: 0, count: 16)
        pthread_getname_np(pthread_self(), &name, name.count)
        return String(cString: name)
    }

    /// Six jobs on a two-thread executor: all on its named threads, never more than two at once,
    /// started in the order they were submitted.
    func testJobsRunOnItsThreadsAtMostWidthAtOnce() async throws {
        let executor = InferenceExecutor(width: 2)
        let state = Shared((running: 0, most: 0, order: [Int](), names: Set<String>()))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for i in 0..<6 {
                group.addTask {
                    try await executor.run { _ in
                        state {
                            $0.running += 1
                            $0.most = max($0.most, $0.running)
                            $0.order.append(i)
                            $0.names.insert(Self.threadName())
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
            XCTAssertEqual($0.names, ["yolo-inference"])
        }
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

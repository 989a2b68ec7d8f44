import Foundation
import Synchronization
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import TestSupport
import XCTest

/// `yolo serve` run as a user runs it: its answers equal `yolo predict --save-json`, and
/// SIGTERM drains the requests in flight before exiting 0.
final class ServeCommandTests: CommandTestCase {
    override class var executableName: String { "yolo" }

    private var environment: [String: String] {
        get throws { ["YOLO_WEIGHTS_DIR": try weightsDirectory().path, "YOLO_CACHE_DIR": scratch.path, "YOLO_OFFLINE": "1"] }
    }

    /// Starts `yolo serve` on a free port and waits (at most 60 s) until `/readyz` answers 200.
    private func serve(_ arguments: [String]) throws -> (RunningCommand, port: Int) {
        let command = try RunningCommand(executable, ["serve", "--port", "0"] + arguments, in: scratch, environment: try environment)
        let deadline = Date().addingTimeInterval(60)
        while Date() < deadline, command.process.isRunning {
            let log = (try? String(contentsOf: scratch.appendingPathComponent("stderr"), encoding: .utf8)) ?? ""
            if let match = log.firstMatch(of: /listening.* port=(\d+)|port=(\d+).*listening/),
               let port = Int(match.output.1 ?? match.output.2 ?? ""),
               (try? request(port, "/readyz").status) == 200 {
                return (command, port)
            }
            usleep(100_000)
        }
        let result = try command.wait(timeout: 1)
        throw MissingTestInput(description: "yolo serve did not get ready: \(result.status) \(result.stderr)")
    }

    /// Every task on every shared image: the server's record equals the one `yolo predict
    /// --save-json` writes, but for the timings.
    func testAnswersEqualPredict() throws {
        let models = ["yolo26n", "yolo26n-seg", "yolo26n-pose", "yolo26n-obb", "yolo26n-cls"]
        let images = try sharedFile("images")
        let (server, port) = try serve(models.flatMap { ["--model", $0] } + ["--workers", "1"])
        defer { kill(server.process.processIdentifier, SIGTERM); _ = try? server.wait(timeout: 30) }
        // yolo predict runs in a folder of its own: its output files are not the server's.
        let folder = scratch.appendingPathComponent("predict")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for model in models {
            let predicted = try runCommand(executable, ["predict", "--model", model, "--source", images.path, "--save-json", "\(model).json"],
                                           in: folder, environment: try environment)
            XCTAssertEqual(predicted.status, 0, predicted.stderr)
            let records = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(contentsOf: folder.appendingPathComponent("\(model).json")))
                as? [[String: Any]])
            XCTAssertEqual(records.count, 3)
            for record in records {
                let name = try XCTUnwrap(record["image"] as? String)
                let answer = try request(port, "/v1/predict?model=\(model)", image: Data(contentsOf: images.appendingPathComponent(name)))
                XCTAssertEqual(answer.status, 200, String(decoding: answer.body, as: UTF8.self))
                var served = try XCTUnwrap(JSONSerialization.jsonObject(with: answer.body) as? [String: Any])
                var expected = record
                for key in ["speed_ms", "image"] { (served[key], expected[key]) = (nil, nil) }
                XCTAssertEqual(served as NSDictionary, expected as NSDictionary, "\(model) \(name)")
            }
        }
    }

    /// SIGTERM with a request running (and the others of three sent at once queued or on their
    /// way): all three are answered, then the server exits 0.
    func testSIGTERMDrainsRequestsInFlight() throws {
        let (server, port) = try serve(["--workers", "1", "--drain-timeout", "60"])
        let boats = try Data(contentsOf: try sharedFile("images/boats.jpg"))
        let statuses = Locked<[Int]>([])
        let group = DispatchGroup()
        // Threads of their own: three blocks waiting on Dispatch's global queue would hold the
        // threads URLSession's own queues need on 2 cores, and the requests would not start.
        for _ in 0..<3 {
            group.enter()
            Thread {
                let status = (try? request(port, "/v1/predict?imgsz=1280", image: boats).status) ?? -1
                statuses.withLock { $0.append(status) }
                group.leave()
            }.start()
        }
        // SIGTERM once a request runs.
        let deadline = Date().addingTimeInterval(30)
        var busy = false
        while !busy, Date() < deadline {
            let metrics = String(decoding: (try? request(port, "/metrics").body) ?? Data(), as: UTF8.self)
            busy = metrics.contains("yolo_inference_in_flight 1.0")
            if !busy { usleep(1000) }
        }
        kill(server.process.processIdentifier, SIGTERM)
        group.wait()
        let result = try server.wait(timeout: 60)
        XCTAssertTrue(busy, "SIGTERM came with a request running")
        XCTAssertEqual(statuses.withLock { $0 }, [200, 200, 200], result.stderr)
        XCTAssertEqual(result.status, 0, result.stderr)
    }
}

/// A request's status and body, synchronously.
private func request(_ port: Int, _ path: String, image: Data? = nil) throws -> (status: Int, body: Data) {
    var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)")!)
    request.timeoutInterval = 60
    if let image {
        request.httpMethod = "POST"
        request.httpBody = image
        request.setValue("image/jpeg", forHTTPHeaderField: "Content-Type")
    }
    let done = DispatchSemaphore(value: 0)
    let answer = Locked<Result<(status: Int, body: Data), any Error>>(.failure(URLError(.unknown)))
    URLSession.shared.dataTask(with: request) { data, response, error in
        answer.withLock { $0 = error.map { .failure($0) } ?? .success(((response as? HTTPURLResponse)?.statusCode ?? 0, data ?? Data())) }
        done.signal()
    }.resume()
    done.wait()
    return try answer.withLock { $0 }.get()
}

/// A value shared with the threads of URLSession and Dispatch.
private final class Locked<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

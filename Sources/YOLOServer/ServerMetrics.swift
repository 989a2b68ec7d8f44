import CoreMetrics
import Prometheus

/// The server's metrics, in a registry of its own (no global bootstrap, so several servers can
/// live in one process, as in the tests), emitted as Prometheus text by `GET /metrics`.
final class ServerMetrics: Sendable {
    let registry = PrometheusCollectorRegistry()
    private let factory: PrometheusMetricsFactory
    /// Whole requests, from the first byte read to the response.
    let requests: Timer
    /// Time a job waited for a worker.
    let queueWait: Timer
    /// Time a job held its worker: decoding, the pass, post-processing, encoding.
    let inference: Timer
    /// Jobs running on workers, and jobs waiting for one.
    let inFlight: Meter
    let queued: Meter

    init() {
        var factory = PrometheusMetricsFactory(registry: registry)
        // Inference on a CPU takes tens of milliseconds to seconds.
        factory.defaultDurationHistogramBuckets = [.milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25),
                                                   .milliseconds(50), .milliseconds(100), .milliseconds(250), .milliseconds(500),
                                                   .seconds(1), .milliseconds(2500), .seconds(5), .seconds(10), .seconds(30)]
        self.factory = factory
        requests = Timer(label: "yolo_request_duration_seconds", factory: factory)
        queueWait = Timer(label: "yolo_queue_wait_seconds", factory: factory)
        inference = Timer(label: "yolo_inference_duration_seconds", factory: factory)
        inFlight = Meter(label: "yolo_inference_in_flight", factory: factory)
        queued = Meter(label: "yolo_queue_length", factory: factory)
    }

    /// Counts a response by its status code (`yolo_requests_total{code="200"}`).
    func count(status: Int) {
        Counter(label: "yolo_requests_total", dimensions: [("code", String(status))], factory: factory).increment()
    }

    /// The Prometheus text exposition of every metric.
    func text() -> [UInt8] {
        var buffer = [UInt8]()
        registry.emit(into: &buffer)
        return buffer
    }
}

import Foundation
import YOLOCore
import YOLONet

/// The network under test and where its weights came from.
struct BenchModel {
    let name: String
    let network: Network
    /// The weight file, or nil when the graph was built with seeded random weights.
    let file: String?

    /// `spec` is a weight file path or a model name, found by `ModelStore` (official models are
    /// not downloaded); a built-in architecture name without a file gets random weights, since
    /// latency does not depend on weight values.
    init(_ spec: String, precision: Precision = .fp32) throws {
        let url: URL
        do {
            url = try ModelStore.fromEnvironment().url(for: spec, downloading: false)
        } catch YOLOError.modelNotFound(_, let searched) {
            guard let architecture = try Architecture.builtin(named: spec) else {
                throw BenchError("unknown model '\(spec)': no file at \(searched.joined(separator: ", ")), "
                    + "and not a built-in architecture (\(Architecture.builtinSpecs.joined(separator: ", ")), "
                    + "with a scale letter n/s/m/l/x after the version where the family has scales, e.g. yolov8n-seg)")
            }
            var weights = RandomWeights(precision: precision)
            (name, network, file) = (spec, try Network(architecture: architecture, weights: &weights), nil)
            return
        }
        (name, network, file) = (url.deletingPathExtension().lastPathComponent, try Model(contentsOf: url, precision: precision).network, url.path)
    }
}

/// A failure the user can act on, printed as one line.
struct BenchError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

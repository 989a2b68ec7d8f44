import Foundation
import Yams

/// Settings of a multi-object tracker, the keys of Ultralytics' tracker YAML files
/// (`cfg/trackers/bytetrack.yaml`, `botsort.yaml`).
///
/// ```swift
/// let byte = TrackerConfiguration.bytetrack                        // Ultralytics' defaults
/// let bot = try TrackerConfiguration(named: "../shared/trackers/botsort-nogmc.yaml")
/// ```
public struct TrackerConfiguration: Sendable, Equatable {
    /// The tracking algorithm (`tracker_type`).
    public enum Algorithm: String, Sendable, CaseIterable {
        /// ByteTrack: IoU matching of Kalman-predicted boxes (xyah state), high then low scores.
        case bytetrack
        /// BoT-SORT without ReID and camera-motion compensation: ByteTrack with an xywh state.
        case botsort
    }

    /// ByteTrack or BoT-SORT (`tracker_type`).
    public var algorithm: Algorithm
    /// Detections at or above this confidence take part in the first association
    /// (`track_high_thresh`), 0…1.
    public var trackHighThreshold: Double = 0.25
    /// Detections above this and below `trackHighThreshold` take part in the second
    /// (`track_low_thresh`), 0…1.
    public var trackLowThreshold: Double = 0.1
    /// Least confidence of an unmatched detection that starts a track (`new_track_thresh`), 0…1.
    public var newTrackThreshold: Double = 0.25
    /// Frames a lost track is kept before it is removed (`track_buffer`), ≥ 0. Ultralytics
    /// 8.4.190 uses it as is, whatever the source's frame rate.
    public var trackBuffer: Int = 30
    /// Largest matching cost of the first association (`match_thresh`), 0…1.
    public var matchThreshold: Double = 0.8
    /// Multiply IoU similarity by the detection's confidence before matching (`fuse_score`).
    public var fuseScore: Bool = true
    /// BoT-SORT: least IoU for ReID to count (`proximity_thresh`), 0…1; unused without ReID.
    public var proximityThreshold: Double = 0.5
    /// BoT-SORT: least appearance similarity (`appearance_thresh`), 0…1; unused without ReID.
    public var appearanceThreshold: Double = 0.8

    /// Ultralytics' default thresholds for `algorithm`.
    public init(algorithm: Algorithm) { self.algorithm = algorithm }

    /// Ultralytics' `bytetrack.yaml`.
    public static let bytetrack = TrackerConfiguration(algorithm: .bytetrack)
    /// Ultralytics' `botsort.yaml` with `gmc_method: none` (camera-motion compensation is not
    /// supported yet).
    public static let botsort = TrackerConfiguration(algorithm: .botsort)

    /// A built-in configuration by name (`bytetrack`, `botsort`, with or without `.yaml`) or an
    /// Ultralytics tracker YAML file by path.
    public init(named name: String) throws {
        switch name {
        case "bytetrack", "bytetrack.yaml": self = .bytetrack
        case "botsort", "botsort.yaml": self = .botsort
        default:
            guard FileManager.default.fileExists(atPath: name) else {
                throw TrackerConfigurationError.unreadable(
                    source: name, reason: "no such file; name bytetrack, botsort or an Ultralytics tracker YAML file")
            }
            let text: String
            do {
                text = try readText(URL(fileURLWithPath: name), limit: Dataset.maxYAMLBytes)
            } catch {
                throw TrackerConfigurationError.unreadable(source: name, reason: error.reason)
            }
            try self.init(yaml: text, source: name)
        }
    }

    /// A configuration from the text of an Ultralytics tracker YAML file; `source` names it in
    /// errors. Every key the algorithm reads must be present, and no other.
    public init(yaml: String, source: String = "tracker YAML") throws {
        typealias Failure = TrackerConfigurationError
        let document: YAMLMapping
        do {
            document = try YAMLMapping(yaml: yaml)
        } catch {
            throw Failure.invalidYAML(source: source, reason: error.reason)
        }
        let values = document.values
        func scalar(_ key: String) throws -> Node {
            guard let node = values[key] else { throw Failure.missingKey(source: source, key: key) }
            return node
        }
        func describe(_ node: Node) -> String { node.scalar?.string ?? "a \(node.kind.rawValue.split(separator: ":").last ?? "")" }
        func string(_ key: String) throws -> String? {
            let node = try scalar(key)
            if node.kind == .null { return nil }
            guard node.kind == .str, let text = node.string else {
                throw Failure.wrongType(source: source, key: key, value: describe(node), expected: "a string")
            }
            return text
        }
        func number(_ key: String) throws -> Double {
            let node = try scalar(key)
            guard node.kind == .float || node.kind == .int, let value = node.float else {
                throw Failure.wrongType(source: source, key: key, value: describe(node), expected: "a number")
            }
            guard (0...1).contains(value) else {
                throw Failure.outOfRange(source: source, key: key, value: describe(node), allowed: "0…1")
            }
            return value
        }
        func flag(_ key: String) throws -> Bool {
            let node = try scalar(key)
            guard node.kind == .bool, let value = node.bool else {
                throw Failure.wrongType(source: source, key: key, value: describe(node), expected: "true or false")
            }
            return value
        }

        let typeName = try string("tracker_type") ?? "null"
        guard let algorithm = Algorithm(rawValue: typeName) else {
            throw Failure.notSupported(source: source, key: "tracker_type", value: typeName,
                                       reason: "only bytetrack and botsort are supported yet")
        }
        var known = ["tracker_type", "track_high_thresh", "track_low_thresh", "new_track_thresh", "track_buffer",
                     "match_thresh", "fuse_score"]
        if algorithm == .botsort {
            known += ["gmc_method", "proximity_thresh", "appearance_thresh", "with_reid", "model"]
        }
        if let unknown = document.keys.first(where: { !known.contains($0) }) {
            throw Failure.unknownKey(source: source, key: unknown, tracker: algorithm.rawValue)
        }
        self.init(algorithm: algorithm)
        trackHighThreshold = try number("track_high_thresh")
        trackLowThreshold = try number("track_low_thresh")
        newTrackThreshold = try number("new_track_thresh")
        let buffer = try scalar("track_buffer")
        guard let frames = buffer.integer else {
            throw Failure.wrongType(source: source, key: "track_buffer", value: describe(buffer), expected: "a whole number of frames")
        }
        guard frames >= 0 else {
            throw Failure.outOfRange(source: source, key: "track_buffer", value: describe(buffer), allowed: "0 or more frames")
        }
        trackBuffer = frames
        matchThreshold = try number("match_thresh")
        fuseScore = try flag("fuse_score")
        guard algorithm == .botsort else { return }
        proximityThreshold = try number("proximity_thresh")
        appearanceThreshold = try number("appearance_thresh")
        // Ultralytics' GMC takes "none", "None" or null as off.
        let gmc = try string("gmc_method")
        if let gmc, !["none", "None"].contains(gmc) {
            let reason = ["sparseOptFlow", "orb", "sift", "ecc"].contains(gmc)
                ? "camera-motion compensation is not supported yet; use none"
                : "not a GMC method (sparseOptFlow, orb, sift, ecc or none), and only none is supported yet"
            throw Failure.notSupported(source: source, key: "gmc_method", value: gmc, reason: reason)
        }
        if try flag("with_reid") {
            throw Failure.notSupported(source: source, key: "with_reid", value: "true", reason: "ReID is not supported yet; use false")
        }
        if values["model"] != nil { _ = try string("model") }
    }
}

/// Why a tracker configuration could not be read.
public enum TrackerConfigurationError: Error, LocalizedError, Equatable {
    /// The file could not be read.
    case unreadable(source: String, reason: String)
    /// The text is no YAML mapping.
    case invalidYAML(source: String, reason: String)
    /// A key the tracker needs is absent.
    case missingKey(source: String, key: String)
    /// A key that `tracker` does not read.
    case unknownKey(source: String, key: String, tracker: String)
    /// A value of the wrong type.
    case wrongType(source: String, key: String, value: String, expected: String)
    /// A value outside its range.
    case outOfRange(source: String, key: String, value: String, allowed: String)
    /// A valid Ultralytics setting this runtime does not implement.
    case notSupported(source: String, key: String, value: String, reason: String)

    public var errorDescription: String? {
        switch self {
        case let .unreadable(source, reason):
            "cannot read tracker configuration \(source): \(reason)"
        case let .invalidYAML(source, reason):
            "tracker configuration \(source) is not valid: \(reason)"
        case let .missingKey(source, key):
            "tracker configuration \(source) lacks the key \(key)"
        case let .unknownKey(source, key, tracker):
            "tracker configuration \(source) has the key \(key), which \(tracker) does not use (a typo?)"
        case let .wrongType(source, key, value, expected):
            "tracker configuration \(source): \(key) = \(value) is invalid: expected \(expected)"
        case let .outOfRange(source, key, value, allowed):
            "tracker configuration \(source): \(key) = \(value) is out of range: must be \(allowed)"
        case let .notSupported(source, key, value, reason):
            "tracker configuration \(source): \(key) = \(value) is not supported: \(reason)"
        }
    }
}

import Foundation
import Yams

/// Settings of a multi-object tracker: the keys of Ultralytics' tracker YAML files
/// (`cfg/trackers/bytetrack.yaml`, `botsort.yaml`, `tracktrack.yaml`, `ocsort.yaml`,
/// `fasttrack.yaml`, `deepocsort.yaml`), and of the spatial lifecycle tracker.
///
/// ```swift
/// let byte = TrackerConfiguration.bytetrack                        // Ultralytics' defaults
/// let bot = try TrackerConfiguration(named: "../shared/trackers/botsort-nogmc.yaml")
/// var spatial = TrackerConfiguration.spatial
/// spatial.maxTracks = 50
/// ```
///
/// Each property says which trackers read it; the others ignore it.
public struct TrackerConfiguration: Sendable, Equatable {
    /// The tracking algorithm (`tracker_type`).
    public enum Algorithm: String, Sendable, CaseIterable {
        /// ByteTrack: IoU matching of Kalman-predicted boxes (xyah state), high then low scores.
        case bytetrack
        /// BoT-SORT without ReID and camera-motion compensation: ByteTrack with an xywh state.
        case botsort
        /// TrackTrack: height-modulated IoU, confidence and corner-angle costs, iterative greedy
        /// matching, track-aware initialization, camera-motion compensation (xywh state).
        case tracktrack
        /// OC-SORT: ByteTrack's xyah state with a motion-direction cost, recovery by the last
        /// observation and a re-update across occlusion gaps.
        case ocsort
        /// FastTracker: ByteTrack with occlusion handling (Kalman rollback, grace frames) and
        /// suppression of new tracks on top of existing ones.
        case fasttrack
        /// Deep OC-SORT without ReID and camera-motion compensation: OC-SORT with its own thresholds.
        case deepocsort
        /// The spatial lifecycle: candidate → confirmed → stale → lost, recapture by distance,
        /// EMA smoothing.
        case spatial
    }

    /// How a tracker compensates camera motion (`gmc_method`).
    public enum CameraMotion: String, Sendable, CaseIterable {
        /// None: tracks move by their own velocity only.
        case none
        /// Ultralytics' `sparseOptFlow`: corners tracked by pyramidal Lucas–Kanade optical flow
        /// between consecutive frames, a rotation-scale-translation fitted to them; needs the frames.
        case sparseOptFlow
    }

    /// The algorithm (`tracker_type`).
    public var algorithm: Algorithm
    /// Every tracker: seconds of source time an unmatched track is kept (`expire_after`, > 0),
    /// beside the frame limits (`trackBuffer`, `lostFrames`): the first reached removes it. nil:
    /// frames only. It needs the frames' times (`Results.time`, or `ObjectTracker.update(_:time:)`);
    /// frames without one expire tracks by frames only.
    public var expireAfter: Double?

    // MARK: The ByteTrack family (all but spatial)

    /// Detections at or above this confidence take part in the first association
    /// (`track_high_thresh`), 0…1.
    public var trackHighThreshold: Double = 0.25
    /// Detections above this and below `trackHighThreshold` take part in the second
    /// (`track_low_thresh`), 0…1.
    public var trackLowThreshold: Double = 0.1
    /// Least confidence of an unmatched detection that starts a track (`new_track_thresh`), 0…1;
    /// TrackTrack starts one only above it.
    public var newTrackThreshold: Double = 0.25
    /// Frames a lost track is kept before it is removed (`track_buffer`), ≥ 0. Ultralytics
    /// 8.4.190 uses it as is, whatever the source's frame rate.
    public var trackBuffer: Int = 30
    /// Largest matching cost of the first association (`match_thresh`), 0…1; TrackTrack's
    /// starting threshold of its iterative matching.
    public var matchThreshold: Double = 0.8
    /// Multiply IoU similarity by the detection's confidence before matching (`fuse_score`);
    /// not a TrackTrack key.
    public var fuseScore: Bool = true
    /// BoT-SORT, Deep OC-SORT: least IoU for ReID to count (`proximity_thresh`), 0…1; unused without ReID.
    public var proximityThreshold: Double = 0.5
    /// BoT-SORT, Deep OC-SORT: least appearance similarity (`appearance_thresh`), 0…1; unused without ReID.
    public var appearanceThreshold: Double = 0.8
    /// TrackTrack: camera-motion compensation (`gmc_method`); the others support `none` only.
    public var cameraMotion: CameraMotion = .none

    // MARK: OC-SORT and Deep OC-SORT

    /// Frames back of the observation the motion direction is measured from (`delta_t`), ≥ 1.
    public var deltaT: Int = 3
    /// Weight of the motion-direction cost (`inertia`), 0…1.
    public var inertia: Double = 0.2
    /// Run ByteTrack's second association on the low-confidence boxes (`use_byte`).
    public var useByte: Bool = false
    /// Deep OC-SORT: base EMA factor of the appearance embeddings (`alpha_fixed_emb`), 0…1;
    /// unused without ReID.
    public var embeddingSmoothing: Double = 0.95

    // MARK: FastTrack

    /// Frames back of the Kalman velocity restored when an occlusion starts
    /// (`reset_velocity_offset_occ`), ≥ 1.
    public var occlusionVelocityFramesBack: Int = 5
    /// Frames back of the Kalman position restored when an occlusion starts
    /// (`reset_pos_offset_occ`), ≥ 1.
    public var occlusionPositionFramesBack: Int = 3
    /// One-shot scale of an occluded track's height (`enlarge_bbox_occ`), ≥ 1.
    public var occlusionEnlargement: Double = 1.1
    /// Factor on an occluded track's velocity (`dampen_motion_occ`), 0…1.
    public var occlusionDamping: Double = 0.5
    /// Most frames an occluded track stays tracked before it is lost (`active_occ_to_lost_thresh`), ≥ 0.
    public var occludedFramesBeforeLost: Int = 10
    /// Share of a track's area another track must cover for it to count as occluded
    /// (`occ_cover_thresh`), 0…1.
    public var occlusionCoverThreshold: Double = 0.7
    /// Frames a track lost while occluded stays findable (`occ_reappear_window`), ≥ 0.
    public var occlusionReappearWindow: Int = 40
    /// A detection overlapping an active track by at least this IoU starts no track
    /// (`init_iou_suppress`), 0…1; 1 turns it off.
    public var newTrackSuppressionIoU: Double = 0.7

    // MARK: TrackTrack

    /// Cost limit of a second, looser matching of still-lost tracks (`lost_match_thr`), 0…1; 0 turns it off.
    public var lostMatchThreshold: Double = 0
    /// Weight of the height-modulated IoU distance with ReID (`iou_weight`), 0…1; unused without ReID.
    public var iouWeight: Double = 0.5
    /// Weight of the appearance distance (`reid_weight`), 0…1; unused without ReID.
    public var reidWeight: Double = 0.5
    /// Weight of the confidence distance (`conf_weight`), 0…1.
    public var confidenceWeight: Double = 0.1
    /// Weight of the corner-angle distance (`angle_weight`), 0…1.
    public var angleWeight: Double = 0.05
    /// Cost added for low-confidence detections (`penalty_p`), 0…1.
    public var lowConfidencePenalty: Double = 0.2
    /// Cost added for detections recovered from a looser NMS (`penalty_q`), 0…1.
    public var recoveredPenalty: Double = 0.4
    /// How much the matching threshold falls per round of iterative matching (`reduce_step`), 0…1.
    public var reduceStep: Double = 0.05
    /// IoU above which track-aware initialization suppresses a new track (`tai_thr`), 0…1.
    public var initializationIoU: Double = 0.55
    /// Matched frames before a new track is confirmed (`min_track_len`), ≥ 1.
    public var minTrackLength: Int = 3

    // MARK: Spatial lifecycle

    /// Least confidence of a detection that starts a track (`min_detection_confidence`), 0…1;
    /// weaker ones may still continue a track.
    public var minDetectionConfidence: Double = 0.35
    /// First-stage matching: least IoU of a track's box and a detection (`high_iou_threshold`), 0…1.
    public var highIoUThreshold: Double = 0.75
    /// Consecutive matched frames before a candidate is confirmed and reported
    /// (`confirmation_frames`), ≥ 1.
    public var confirmationFrames: Int = 3
    /// Unmatched frames after which a confirmed track is stale (`stale_frames`), ≥ 1.
    public var staleFrames: Int = 15
    /// Unmatched frames after which a track is lost and forgotten (`lost_frames`), > `staleFrames`.
    public var lostFrames: Int = 90
    /// How far from its last position a stale track is recaptured, as a fraction of its box's
    /// diagonal (`recapture_distance`), ≥ 0.
    public var recaptureDistance: Double = 0.5
    /// EMA weight of the new observation for position, size and confidence (`smoothing`), in
    /// (0, 1]; 1 smooths nothing.
    public var smoothing: Double = 0.6
    /// Most live tracks (`max_tracks`), ≥ 1, nil for no cap: past it, the candidates of lowest
    /// confidence go first, then the stale tracks.
    public var maxTracks: Int?

    /// Ultralytics' default settings for `algorithm` (from its YAML file; BoT-SORT, TrackTrack
    /// and Deep OC-SORT without ReID, BoT-SORT without camera-motion compensation).
    public init(algorithm: Algorithm) {
        self.algorithm = algorithm
        switch algorithm {
        case .tracktrack:
            (trackHighThreshold, trackLowThreshold, newTrackThreshold, matchThreshold) = (0.6, 0.25, 0.7, 0.7)
            cameraMotion = .sparseOptFlow
        case .deepocsort:
            (trackHighThreshold, newTrackThreshold, appearanceThreshold) = (0.3, 0.3, 0.9)
        default: break
        }
    }

    /// Ultralytics' `bytetrack.yaml`.
    public static let bytetrack = TrackerConfiguration(algorithm: .bytetrack)
    /// Ultralytics' `botsort.yaml` with `gmc_method: none` (BoT-SORT's camera-motion compensation
    /// is not supported yet).
    public static let botsort = TrackerConfiguration(algorithm: .botsort)
    /// Ultralytics' `tracktrack.yaml`: camera-motion compensation by sparse optical flow.
    public static let tracktrack = TrackerConfiguration(algorithm: .tracktrack)
    /// Ultralytics' `ocsort.yaml`.
    public static let ocsort = TrackerConfiguration(algorithm: .ocsort)
    /// Ultralytics' `fasttrack.yaml`.
    public static let fasttrack = TrackerConfiguration(algorithm: .fasttrack)
    /// Ultralytics' `deepocsort.yaml` (no ReID, no camera-motion compensation).
    public static let deepocsort = TrackerConfiguration(algorithm: .deepocsort)
    /// The spatial lifecycle tracker with its defaults.
    public static let spatial = TrackerConfiguration(algorithm: .spatial)

    /// A built-in configuration by name (an `Algorithm` name, with or without `.yaml`) or a
    /// tracker YAML file by path.
    public init(named name: String) throws {
        let base = name.hasSuffix(".yaml") ? String(name.dropLast(5)) : name
        if let algorithm = Algorithm(rawValue: base) {
            self.init(algorithm: algorithm)
            return
        }
        guard FileManager.default.fileExists(atPath: name) else {
            let names = Algorithm.allCases.map(\.rawValue).joined(separator: ", ")
            throw TrackerConfigurationError.unreadable(
                source: name, reason: "no such file; name \(names) or a tracker YAML file")
        }
        let text: String
        do {
            text = try readText(URL(fileURLWithPath: name), limit: Dataset.maxYAMLBytes)
        } catch {
            throw TrackerConfigurationError.unreadable(source: name, reason: error.reason)
        }
        try self.init(yaml: text, source: name)
    }

    /// A configuration from the text of a tracker YAML file; `source` names it in errors. Every
    /// key the algorithm reads must be present, and no other.
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
        func number(_ key: String, in range: ClosedRange<Double> = 0...1) throws -> Double {
            let node = try scalar(key)
            guard node.kind == .float || node.kind == .int, let value = node.float else {
                throw Failure.wrongType(source: source, key: key, value: describe(node), expected: "a number")
            }
            guard range.contains(value) else {
                func text(_ x: Double) -> String { x == x.rounded() ? "\(Int(x))" : "\(x)" }
                let allowed = range.upperBound.isFinite ? "\(text(range.lowerBound))…\(text(range.upperBound))"
                    : "\(text(range.lowerBound)) or more"
                throw Failure.outOfRange(source: source, key: key, value: describe(node), allowed: allowed)
            }
            return value
        }
        func frames(_ key: String, least: Int = 0) throws -> Int {
            let node = try scalar(key)
            guard let frames = node.integer else {
                throw Failure.wrongType(source: source, key: key, value: describe(node), expected: "a whole number of frames")
            }
            guard frames >= least else {
                throw Failure.outOfRange(source: source, key: key, value: describe(node), allowed: "\(least) or more frames")
            }
            return frames
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
                                       reason: "not a tracker: use " + Algorithm.allCases.map(\.rawValue).joined(separator: ", "))
        }
        let byteKeys = ["track_high_thresh", "track_low_thresh", "new_track_thresh", "track_buffer", "match_thresh"]
        let reidKeys = ["gmc_method", "proximity_thresh", "appearance_thresh", "with_reid", "model"]
        let ocsortKeys = ["delta_t", "inertia", "use_byte"]
        let known: [String] = switch algorithm {
        case .bytetrack: byteKeys + ["fuse_score"]
        case .botsort: byteKeys + ["fuse_score"] + reidKeys
        case .ocsort: byteKeys + ["fuse_score"] + ocsortKeys
        case .deepocsort: byteKeys + ["fuse_score"] + ocsortKeys + reidKeys + ["alpha_fixed_emb"]
        case .fasttrack:
            byteKeys + ["fuse_score", "reset_velocity_offset_occ", "reset_pos_offset_occ", "enlarge_bbox_occ", "dampen_motion_occ",
                        "active_occ_to_lost_thresh", "occ_cover_thresh", "occ_reappear_window", "init_iou_suppress"]
        case .tracktrack:
            byteKeys + ["lost_match_thr", "iou_weight", "reid_weight", "conf_weight", "angle_weight", "penalty_p", "penalty_q",
                        "reduce_step", "tai_thr", "min_track_len", "gmc_method", "with_reid", "model"]
        case .spatial:
            ["min_detection_confidence", "high_iou_threshold", "confirmation_frames", "stale_frames", "lost_frames",
             "recapture_distance", "smoothing", "max_tracks"]
        }
        if let unknown = document.keys.first(where: { !["tracker_type", "expire_after"].contains($0) && !known.contains($0) }) {
            throw Failure.unknownKey(source: source, key: unknown, tracker: algorithm.rawValue)
        }
        self.init(algorithm: algorithm)
        // yolo-swift's own key, optional in every tracker's file.
        if let node = values["expire_after"], node.kind != .null {
            expireAfter = try number("expire_after", in: 0.001...Double.infinity)
        }

        if algorithm == .spatial {
            minDetectionConfidence = try number("min_detection_confidence")
            highIoUThreshold = try number("high_iou_threshold")
            confirmationFrames = try frames("confirmation_frames", least: 1)
            staleFrames = try frames("stale_frames", least: 1)
            lostFrames = try frames("lost_frames", least: staleFrames + 1)
            recaptureDistance = try number("recapture_distance", in: 0...Double.infinity)
            smoothing = try number("smoothing")
            guard smoothing > 0 else {
                throw Failure.outOfRange(source: source, key: "smoothing", value: describe(try scalar("smoothing")), allowed: "(0, 1]")
            }
            maxTracks = try scalar("max_tracks").kind == .null ? nil : try frames("max_tracks", least: 1)
            return
        }
        trackHighThreshold = try number("track_high_thresh")
        trackLowThreshold = try number("track_low_thresh")
        newTrackThreshold = try number("new_track_thresh")
        trackBuffer = try frames("track_buffer")
        matchThreshold = try number("match_thresh")
        if algorithm != .tracktrack { fuseScore = try flag("fuse_score") }
        if known.contains("delta_t") {
            deltaT = try frames("delta_t", least: 1)
            inertia = try number("inertia")
            useByte = try flag("use_byte")
        }
        if known.contains("proximity_thresh") {
            proximityThreshold = try number("proximity_thresh")
            appearanceThreshold = try number("appearance_thresh")
        }
        if algorithm == .deepocsort { embeddingSmoothing = try number("alpha_fixed_emb") }
        if algorithm == .fasttrack {
            occlusionVelocityFramesBack = try frames("reset_velocity_offset_occ", least: 1)
            occlusionPositionFramesBack = try frames("reset_pos_offset_occ", least: 1)
            occlusionEnlargement = try number("enlarge_bbox_occ", in: 1...Double.infinity)
            occlusionDamping = try number("dampen_motion_occ")
            occludedFramesBeforeLost = try frames("active_occ_to_lost_thresh")
            occlusionCoverThreshold = try number("occ_cover_thresh")
            occlusionReappearWindow = try frames("occ_reappear_window")
            newTrackSuppressionIoU = try number("init_iou_suppress")
        }
        if algorithm == .tracktrack {
            lostMatchThreshold = try number("lost_match_thr")
            iouWeight = try number("iou_weight")
            reidWeight = try number("reid_weight")
            confidenceWeight = try number("conf_weight")
            angleWeight = try number("angle_weight")
            lowConfidencePenalty = try number("penalty_p")
            recoveredPenalty = try number("penalty_q")
            reduceStep = try number("reduce_step")
            initializationIoU = try number("tai_thr")
            minTrackLength = try frames("min_track_len", least: 1)
        }
        guard known.contains("gmc_method") else { return }
        // Ultralytics' GMC takes "none", "None" or null as off.
        let gmc = try string("gmc_method")
        if let gmc, !["none", "None"].contains(gmc) {
            let methods = ["sparseOptFlow", "orb", "sift", "ecc"]
            if algorithm == .tracktrack && gmc == "sparseOptFlow" {
                cameraMotion = .sparseOptFlow
            } else {
                let supported = algorithm == .tracktrack ? "sparseOptFlow and none" : "none"
                let reason = methods.contains(gmc)
                    ? (algorithm == .tracktrack ? "only sparseOptFlow and none are supported yet"
                        : "camera-motion compensation is not supported yet; use none")
                    : "not a GMC method (sparseOptFlow, orb, sift, ecc or none), and only \(supported) \(algorithm == .tracktrack ? "are" : "is") supported yet"
                throw Failure.notSupported(source: source, key: "gmc_method", value: gmc, reason: reason)
            }
        } else {
            cameraMotion = .none
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

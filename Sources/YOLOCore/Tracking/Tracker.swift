import Foundation

/// A multi-object tracker, Ultralytics 8.4.190's `BYTETracker` or `BOTSORT` (without ReID and
/// camera-motion compensation): it gives the boxes of consecutive frames of one source identities
/// that persist across frames. A value: copies track independently.
///
/// ```swift
/// var tracker = ObjectTracker(.bytetrack)
/// for frame in frames {
///     let boxes = tracker.update(detector(frame))        // boxes from any detector
///     for box in boxes { print(box.id ?? -1, box.name) }
/// }
/// ```
///
/// Feed it every frame, with detections down to confidence 0.1 (`model.track` lowers the
/// detector's confidence to 0.1): low-confidence boxes keep existing tracks alive.
public struct ObjectTracker: Sendable {
    /// The algorithm and thresholds, fixed for the tracker's life.
    public let configuration: TrackerConfiguration
    /// How many past positions each track keeps in `Track.history`, ≥ 0.
    public var historyLength: Int = 30
    /// Updates since the tracker was made or reset; the first is frame 1.
    public private(set) var frame = 0
    /// The tracks that became removed in the last update.
    public private(set) var removedTracks: [Track] = []

    private let filter: KalmanFilter
    /// Every track in `tracked` or `lost`, by ID.
    private var pool = TrackPool()
    /// Ultralytics' `tracked_stracks`, `lost_stracks` and `removed_stracks` (the last 1000
    /// removals, repeats included), as track IDs in Ultralytics' order.
    private var tracked = [Int](), lost = [Int](), removed = [Int]()
    /// How many times each ID occurs in `removed`: its membership test without a scan.
    private var removedCount = [Int: Int]()
    private var nextID = 1

    /// A tracker with no track yet; its first update is frame 1.
    public init(_ configuration: TrackerConfiguration = .bytetrack) {
        self.configuration = configuration
        filter = KalmanFilter(configuration.algorithm == .bytetrack ? .xyah : .xywh)
    }

    /// Forgets every track; IDs start again at 1.
    public mutating func reset() {
        let length = historyLength
        self = ObjectTracker(configuration)
        historyLength = length
    }

    /// The tracks alive after the last update (tentative, confirmed, lost), in Ultralytics' order:
    /// tracked ones first.
    public var tracks: [Track] {
        (tracked + lost).map { pool[$0] }.filter { $0.phase != .removed }.map(view)
    }

    /// Tracks the boxes of the next frame and returns what Ultralytics reports for it: the
    /// confirmed tracks matched in this frame, in track order, each with its `id`, the Kalman
    /// filter's box clipped to the image and its detection's confidence and class. When no
    /// track is confirmed in this frame, the input boxes as they are (no `id`), or none while a
    /// new track waits for confirmation.
    public mutating func update(_ boxes: [Box]) -> [Box] { step(boxes).boxes }

    /// `update` on a result's boxes, with its masks and keypoints kept with their boxes.
    /// - Throws: `TrackingError.unsupportedTask` for classify and obb results.
    public mutating func update(_ results: Results) throws -> Results {
        guard [.detect, .segment, .pose].contains(results.task) else { throw TrackingError.unsupportedTask(results.task) }
        let (boxes, indices) = step(results.boxes)
        var out = Results(path: results.path, task: results.task, originalShape: results.originalShape,
                          inputShape: results.inputShape, boxes: boxes,
                          masks: results.masks.isEmpty ? [] : indices.map { results.masks[$0] },
                          keypoints: results.keypoints.isEmpty ? [] : indices.map { results.keypoints[$0] },
                          speed: results.speed, image: results.image)
        out.frame = results.frame
        out.lineWidth = results.lineWidth
        return out
    }

    /// `BYTETracker.update` and how `on_predict_postprocess_end` reports it: the boxes, and for
    /// each the index of the input box it stands for.
    private mutating func step(_ boxes: [Box]) -> (boxes: [Box], indices: [Int]) {
        frame += 1
        removedTracks = []
        let high = Float(configuration.trackHighThreshold), low = Float(configuration.trackLowThreshold)
        var detections = [Tracklet](), weak = [Tracklet]()
        for (i, box) in boxes.enumerated() {
            guard let detection = Tracklet(box, index: i) else { continue }
            if box.conf >= high {
                detections.append(detection)
            } else if box.conf > low {
                weak.append(detection)
            }
        }

        let unconfirmed = tracked.filter { !pool[$0].isActivated }
        let candidates = pool.joint(tracked.filter { pool[$0].isActivated }, lost)
        for id in candidates { pool[id].predict(filter) }
        var activated = [Int](), refound = [Int](), newlyLost = [Int](), newlyRemoved = [Int]()
        // A tracked track is updated, a lost one found again (`update`, `re_activate`).
        func apply(_ id: Int, _ detection: Tracklet) {
            if pool[id].phase == .tracked { activated.append(id) } else { refound.append(id) }
            pool[id].update(detection, frame: frame, filter: filter, historyLength: historyLength)
        }

        let first = linearAssignment(distances(candidates, detections), rows: candidates.count, columns: detections.count,
                                     costLimit: configuration.matchThreshold)
        for (t, d) in first.matches { apply(candidates[t], detections[d]) }

        // Tracks still unmatched (not those already lost) try the low-confidence boxes.
        let remaining = first.unmatchedRows.map { candidates[$0] }.filter { pool[$0].phase == .tracked }
        var unmatched = Array(remaining.indices)
        if !remaining.isEmpty && !weak.isEmpty {
            let second = linearAssignment(iouDistance(remaining.map { pool[$0].xyxy }, weak.map(\.xyxy)).map(Double.init),
                                          rows: remaining.count, columns: weak.count, costLimit: 0.5)
            for (t, d) in second.matches { apply(remaining[t], weak[d]) }
            unmatched = second.unmatchedRows
        }
        for t in unmatched {
            pool[remaining[t]].phase = .lost
            newlyLost.append(remaining[t])
        }

        // Tracks started last frame are confirmed by a leftover high-confidence box, or dropped.
        let leftover = first.unmatchedColumns.map { detections[$0] }
        var newcomers = Array(leftover.indices)
        if !unconfirmed.isEmpty {
            let third = linearAssignment(distances(unconfirmed, leftover), rows: unconfirmed.count, columns: leftover.count,
                                         costLimit: 0.7)
            for (t, d) in third.matches {
                pool[unconfirmed[t]].update(leftover[d], frame: frame, filter: filter, historyLength: historyLength)
                activated.append(unconfirmed[t])
            }
            for t in third.unmatchedRows { markRemoved(unconfirmed[t], &newlyRemoved) }
            newcomers = third.unmatchedColumns
        }
        for d in newcomers where leftover[d].score >= Float(configuration.newTrackThreshold) {
            var track = leftover[d]
            track.activate(id: nextID, frame: frame, filter: filter, historyLength: historyLength)
            pool.insert(track)
            activated.append(nextID)
            nextID += 1
        }
        for id in lost where frame - pool[id].frame > configuration.trackBuffer { markRemoved(id, &newlyRemoved) }

        // Ultralytics' merge_track_pools. `lost` loses the tracks removed in earlier frames only:
        // one removed now stays there (and can be found again) for one more frame.
        tracked = pool.joint(pool.joint(tracked.filter { pool[$0].phase == .tracked }, activated), refound)
        lost = pool.subtract(lost, tracked) + newlyLost
        lost.removeAll { removedCount[$0] != nil }
        removeDuplicates()
        remember(newlyRemoved)
        pool.keep(tracked + lost)

        let reported = tracked.filter { pool[$0].isActivated }
        if reported.isEmpty {
            // Ultralytics hides a frame's boxes while a new track waits for confirmation.
            return tracked.isEmpty ? (boxes, Array(boxes.indices)) : ([], [])
        }
        return (reported.map { pool[$0].box }, reported.map { pool[$0].detection })
    }

    /// Appends to `removed`, keeping its last 1000 entries and `removedCount` in step.
    private mutating func remember(_ ids: [Int]) {
        removed += ids
        for id in ids { removedCount[id, default: 0] += 1 }
        guard removed.count > 1000 else { return }
        for id in removed[..<(removed.count - 1000)] {
            removedCount[id]! -= 1
            if removedCount[id] == 0 { removedCount[id] = nil }
        }
        removed.removeFirst(removed.count - 1000)
    }

    private mutating func markRemoved(_ id: Int, _ list: inout [Int]) {
        if pool[id].phase != .removed {
            pool[id].phase = .removed
            removedTracks.append(view(pool[id]))
        }
        list.append(id)
    }

    /// Ultralytics' `remove_duplicate_stracks`: of a tracked and a lost track closer than IoU
    /// 0.85, the one tracked for fewer frames goes.
    private mutating func removeDuplicates() {
        let distance = iouDistance(tracked.map { pool[$0].xyxy }, lost.map { pool[$0].xyxy })
        var dropTracked = Set<Int>(), dropLost = Set<Int>()
        for p in tracked.indices {
            for q in lost.indices where distance[p * lost.count + q] < 0.15 {
                let a = pool[tracked[p]], b = pool[lost[q]]
                if a.frame - a.startFrame > b.frame - b.startFrame { dropLost.insert(q) } else { dropTracked.insert(p) }
            }
        }
        tracked = tracked.indices.filter { !dropTracked.contains($0) }.map { tracked[$0] }
        lost = lost.indices.filter { !dropLost.contains($0) }.map { lost[$0] }
    }

    /// `get_dists`: IoU distance, fused with the detections' confidence when `fuseScore`. Rows
    /// are tracks, columns detections, row-major, in Float32 as NumPy computes them, then as
    /// Double as lap takes them.
    private func distances(_ ids: [Int], _ detections: [Tracklet]) -> [Double] {
        let cost = iouDistance(ids.map { pool[$0].xyxy }, detections.map(\.xyxy))
        guard configuration.fuseScore, !detections.isEmpty else { return cost.map(Double.init) }
        let scores = detections.map(\.score)
        return [Double](unsafeUninitializedCapacity: cost.count) { fused, count in
            for row in stride(from: 0, to: cost.count, by: scores.count) {
                for j in scores.indices { fused[row + j] = Double(1 - (1 - cost[row + j]) * scores[j]) }
            }
            count = cost.count
        }
    }

    private func view(_ t: Tracklet) -> Track {
        let state: Track.State = switch t.phase {
        case .tracked: t.isActivated ? .confirmed : .tentative
        case .lost: .lost
        case .removed, .new: .removed
        }
        return Track(id: t.id, state: state, box: t.box, startFrame: t.startFrame, lastSeenFrame: t.frame,
                     framesSinceSeen: frame - t.frame, history: t.history)
    }
}

/// A track as the tracker sees it after an update.
public struct Track: Sendable, Equatable {
    /// Where a track is in its life: `tentative` (started, not yet matched in a second frame;
    /// not reported), `confirmed` (reported with its ID), `lost` (unmatched, kept for
    /// `trackBuffer` frames in case it comes back), `removed` (gone for good).
    public enum State: String, Sendable {
        case tentative, confirmed, lost, removed
    }

    /// The track's ID, from 1.
    public let id: Int
    /// Where the track is in its life after the last update.
    public let state: State
    /// The Kalman filter's box (for a lost track, where it is predicted to be) clipped to the
    /// image, with the confidence, class and `id` of the last detection matched.
    public let box: Box
    /// The tracker frame (`ObjectTracker.frame`) the track started and was last matched in.
    public let startFrame: Int, lastSeenFrame: Int
    /// Frames since the track was last matched; 0 when matched in the last update.
    public let framesSinceSeen: Int
    /// The centre of the track's box after each match, oldest first, at most
    /// `ObjectTracker.historyLength` of them: trails to draw.
    public let history: [SIMD2<Float>]
}

/// Why boxes could not be tracked.
public enum TrackingError: Error, LocalizedError, Equatable {
    /// Results of a task without boxes to track.
    case unsupportedTask(YOLOTask)

    public var errorDescription: String? {
        switch self {
        case .unsupportedTask(.obb): "tracking rotated boxes (obb results) is not supported yet"
        case let .unsupportedTask(task): "\(task) results have no boxes to track; track detect, segment or pose results"
        }
    }
}

/// Ultralytics' `STrack` / `BOTrack`: a detection, and once activated a track.
private struct Tracklet: Sendable {
    enum Phase { case new, tracked, lost, removed }

    var id = 0
    var phase = Phase.new
    /// Confirmed: matched in two frames, or started in the tracker's first frame.
    var isActivated = false
    var state: KalmanFilter.State?
    /// The filter's form, set by `activate`.
    var form = KalmanFilter.Form.xyah
    /// The detection's box as Ultralytics stores it: top-left x, y, width, height in Float32.
    var tlwh: SIMD4<Float>
    var score: Float
    var cls: Int
    var name: String
    var originalShape: [Int]
    /// Index of the detection last matched in the input of `update`.
    var detection: Int
    var frame = 0, startFrame = 0
    var history = [SIMD2<Float>]()
    /// `TrackPool`'s set membership stamp.
    var mark = 0

    /// Nil for a box without area, which would make the xyah aspect ratio infinite.
    init?(_ box: Box, index: Int) {
        let b = box.xyxy
        guard b.count == 4 else { return nil }
        let x = (b[0] + b[2]) / 2, y = (b[1] + b[3]) / 2, w = b[2] - b[0], h = b[3] - b[1]
        guard w > 0, h > 0 else { return nil }
        // `xywh2ltwh` runs in float64 (the boxes are concatenated with their int64 indices).
        tlwh = SIMD4(Float(Double(x) - Double(w) / 2), Float(Double(y) - Double(h) / 2), w, h)
        score = box.conf
        cls = box.cls
        name = box.name
        originalShape = box.originalShape
        detection = index
    }

    /// The Kalman filter's measurement of `tlwh` (`tlwh_to_xyah` / `tlwh_to_xywh`, Float32).
    func measurement(_ filter: KalmanFilter) -> SIMD4<Double> {
        let w = tlwh[2], h = tlwh[3], x = tlwh[0] + w / 2, y = tlwh[1] + h / 2
        return SIMD4(Double(x), Double(y), Double(filter.form == .xyah ? w / h : w), Double(h))
    }

    /// x1, y1, x2, y2: the filter's box once activated (Double, rounded to Float32 as
    /// `iou_distance` and the results take it), else the detection's.
    var xyxy: SIMD4<Float> {
        guard let mean = state?.mean else { return SIMD4(tlwh[0], tlwh[1], tlwh[0] + tlwh[2], tlwh[1] + tlwh[3]) }
        let w = form == .xyah ? mean[2] * mean[3] : mean[2], h = mean[3]
        let x = mean[0] - w / 2, y = mean[1] - h / 2
        return SIMD4(Float(x), Float(y), Float(x + w), Float(y + h))
    }

    /// The box as reported, clipped to the image as `Results.update` does.
    var box: Box {
        var b = xyxy
        if originalShape.count >= 2 {
            let w = Float(originalShape[1]), h = Float(originalShape[0])
            b = SIMD4(min(max(b[0], 0), w), min(max(b[1], 0), h), min(max(b[2], 0), w), min(max(b[3], 0), h))
        }
        return Box(xyxy: [b[0], b[1], b[2], b[3]], conf: score, cls: cls, name: name, originalShape: originalShape, id: id)
    }

    /// Lost tracks keep their position but stop growing (xyah) or changing size (xywh).
    mutating func predict(_ filter: KalmanFilter) {
        guard var s = state else { return }
        if phase != .tracked {
            s.mean[7] = 0
            if filter.form == .xywh { s.mean[6] = 0 }
        }
        state = filter.predict(s)
    }

    mutating func activate(id: Int, frame: Int, filter: KalmanFilter, historyLength: Int) {
        self.id = id
        form = filter.form
        state = filter.initiate(measurement(filter))
        phase = .tracked
        isActivated = frame == 1
        self.frame = frame
        startFrame = frame
        record(historyLength)
    }

    mutating func update(_ detection: Tracklet, frame: Int, filter: KalmanFilter, historyLength: Int) {
        self.frame = frame
        state = filter.update(state!, measurement: detection.measurement(filter))
        phase = .tracked
        isActivated = true
        take(detection)
        record(historyLength)
    }

    private mutating func take(_ detection: Tracklet) {
        score = detection.score
        cls = detection.cls
        name = detection.name
        originalShape = detection.originalShape
        self.detection = detection.detection
    }

    private mutating func record(_ historyLength: Int) {
        let b = xyxy
        history.append(SIMD2((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))
        if history.count > historyLength { history.removeFirst(history.count - max(historyLength, 0)) }
    }
}

/// Tracklets by ID, stored contiguously (reading a field copies no whole tracklet) and found
/// through an open-addressing table indexed by `id & mask`: IDs are consecutive, so they
/// spread evenly without hashing.
private struct TrackPool {
    private var tracklets = [Tracklet]()
    /// The slot in `tracklets` of the ID at `ids[k]`; ID 0 (never given) marks a free entry.
    private var ids = [Int](repeating: 0, count: 64), slots = [Int](repeating: 0, count: 64)
    /// The last `mark`; a tracklet whose `mark` equals it is in the set last marked.
    private var stamp = 0

    subscript(id: Int) -> Tracklet {
        _read { yield tracklets[slot(of: id)] }
        _modify { yield &tracklets[slot(of: id)] }
    }

    private func slot(of id: Int) -> Int {
        let mask = ids.count - 1
        var k = id & mask
        while ids[k] != id {
            precondition(ids[k] != 0, "track \(id) is not in the pool")
            k = (k + 1) & mask
        }
        return slots[k]
    }

    mutating func insert(_ tracklet: Tracklet) {
        tracklets.append(tracklet)
        // At most half full, so that probes stay short.
        if 2 * tracklets.count > ids.count { index(capacity: 2 * ids.count) } else { enter(tracklets.count - 1) }
    }

    /// Drops every tracklet whose ID is not in `alive`.
    mutating func keep(_ alive: [Int]) {
        mark(alive)
        let count = tracklets.count
        tracklets.removeAll { $0.mark != stamp }
        if tracklets.count != count { index(capacity: ids.count) }
    }

    /// Ultralytics' `joint_stracks`: `a`, then the IDs of `b` not in `a`.
    mutating func joint(_ a: [Int], _ b: [Int]) -> [Int] {
        mark(a)
        return a + b.filter { self[$0].mark != stamp }
    }

    /// Ultralytics' `sub_stracks`: the IDs of `a` not in `b`.
    mutating func subtract(_ a: [Int], _ b: [Int]) -> [Int] {
        mark(b)
        return a.filter { self[$0].mark != stamp }
    }

    /// Stamps the tracklets of `ids` with a new `stamp`: set membership without hashing.
    private mutating func mark(_ ids: [Int]) {
        stamp += 1
        for id in ids { self[id].mark = stamp }
    }

    private mutating func index(capacity: Int) {
        ids = [Int](repeating: 0, count: capacity)
        slots = [Int](repeating: 0, count: capacity)
        for slot in tracklets.indices { enter(slot) }
    }

    private mutating func enter(_ slot: Int) {
        let id = tracklets[slot].id, mask = ids.count - 1
        var k = id & mask
        while ids[k] != 0 { k = (k + 1) & mask }
        (ids[k], slots[k]) = (id, slot)
    }
}

/// 1 − IoU of every box of `a` with every box of `b` (xyxy), row-major, as Ultralytics'
/// `iou_distance`.
package func iouDistance(_ a: [SIMD4<Float>], _ b: [SIMD4<Float>]) -> [Float] {
    var distance = pairwiseIoU(a, b)
    for k in distance.indices { distance[k] = 1 - distance[k] }
    return distance
}

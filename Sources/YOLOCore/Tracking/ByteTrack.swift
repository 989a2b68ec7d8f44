import Foundation

/// Ultralytics' `BYTETracker` and the trackers built on its steps: `BOTSORT` (an xywh state),
/// `OCSORT` and `DeepOCSORT` (OCSort.swift), `FASTTracker` (FastTrack.swift). One frame runs
/// `BYTETracker.update`: the high-confidence boxes against the tracked and lost tracks, then
/// the low-confidence ones against the tracked tracks left, the tentative tracks against the
/// high-confidence boxes left, new tracks from the rest; each tracker changes some of the steps.
struct ByteTracker: TrackingEngine {
    let configuration: TrackerConfiguration
    let filter: KalmanFilter
    var frame = 0
    var removedTracks: [Track] = []
    /// Every track in `tracked` or `lost`, by ID.
    var pool = TrackPool()
    /// Ultralytics' `tracked_stracks`, `lost_stracks` and `removed_stracks` (the last 1000
    /// removals, repeats included), as track IDs in Ultralytics' order.
    var tracked = [Int](), lost = [Int](), removed = [Int]()
    /// How many times each ID occurs in `removed`: its membership test without a scan.
    private var removedCount = [Int: Int]()
    private var nextID = 1
    private var expiry = Expiry(seconds: nil)
    /// What the tracklets need of the settings.
    private(set) var rules: TrackletRules

    init(_ configuration: TrackerConfiguration) {
        self.configuration = configuration
        filter = KalmanFilter(configuration.algorithm == .botsort ? .xywh : .xyah)
        rules = TrackletRules(configuration)
    }

    var isOCSORT: Bool { rules.observations != nil }
    var isFastTrack: Bool { rules.occlusionHistory != nil }

    func tracks(frame: Int) -> [Track] {
        (tracked + lost).map { pool[$0] }.filter { $0.phase != .removed }.map { view($0, frame: frame) }
    }

    /// The tracks' changes in one frame, as Ultralytics collects them.
    struct Changes {
        var activated = [Int](), refound = [Int](), lost = [Int](), removed = [Int]()
    }

    mutating func update(_ input: [Detection], image: Image?, frame: Int, historyLength: Int, expiry: Expiry) -> EngineReport {
        self.frame = frame
        self.expiry = expiry
        rules.historyLength = historyLength
        removedTracks = []
        let high = Float(configuration.trackHighThreshold), low = Float(configuration.trackLowThreshold)
        var detections = [Tracklet](), weak = [Tracklet]()
        for detection in input {
            if detection.score >= high {
                detections.append(Tracklet(detection))
            } else if detection.score > low {
                weak.append(Tracklet(detection))
            }
        }

        let unconfirmed = tracked.filter { !pool[$0].isActivated }
        let candidates = pool.joint(tracked.filter { pool[$0].isActivated }, lost)
        for id in candidates { pool[id].predict(filter) }
        var changes = Changes()

        let first = linearAssignment(distances(candidates, detections), rows: candidates.count, columns: detections.count,
                                     costLimit: configuration.matchThreshold)
        for (t, d) in first.matches { apply(candidates[t], detections[d], &changes) }
        var unmatchedTracks = first.unmatchedRows, unmatchedDetections = first.unmatchedColumns
        if isOCSORT {
            (unmatchedTracks, unmatchedDetections) = recoverByLastObservation(
                candidates, detections, unmatchedTracks, unmatchedDetections, &changes)
        }

        // Tracks still unmatched (not those already lost) try the low-confidence boxes.
        let remaining = unmatchedTracks.map { candidates[$0] }.filter { pool[$0].phase == .tracked }
        var unmatched = Array(remaining.indices)
        if !isOCSORT || configuration.useByte, !remaining.isEmpty, !weak.isEmpty {
            let second = linearAssignment(iouDistance(remaining.map { pool[$0] }, weak).map(Double.init),
                                          rows: remaining.count, columns: weak.count, costLimit: 0.5)
            for (t, d) in second.matches { apply(remaining[t], weak[d], &changes) }
            unmatched = second.unmatchedRows
        }
        if isFastTrack {
            handleOcclusions(unmatched.map { remaining[$0] }, &changes)
        } else {
            for t in unmatched {
                pool[remaining[t]].phase = .lost
                changes.lost.append(remaining[t])
            }
        }

        // Tracks started last frame are confirmed by a leftover high-confidence box, or dropped.
        let leftover = unmatchedDetections.map { detections[$0] }
        var newcomers = Array(leftover.indices)
        if !unconfirmed.isEmpty {
            let third = linearAssignment(distances(unconfirmed, leftover), rows: unconfirmed.count, columns: leftover.count,
                                         costLimit: 0.7)
            for (t, d) in third.matches {
                pool[unconfirmed[t]].update(leftover[d], frame: frame, filter: filter, rules: rules)
                changes.activated.append(unconfirmed[t])
            }
            for t in third.unmatchedRows { markRemoved(unconfirmed[t], &changes.removed) }
            newcomers = third.unmatchedColumns
        }
        var suppressors = isFastTrack ? activeBoxes(changes) : []
        for d in newcomers where leftover[d].score >= Float(configuration.newTrackThreshold) {
            if isFastTrack && suppressed(leftover[d].xyxy, by: suppressors) { continue }
            var track = leftover[d]
            track.activate(id: nextID, frame: frame, filter: filter, rules: rules)
            if isFastTrack { suppressors.append(track.xyxy) }
            pool.insert(track)
            changes.activated.append(nextID)
            nextID += 1
        }
        for id in lost where isStale(pool[id]) { markRemoved(id, &changes.removed) }

        // Ultralytics' merge_track_pools. `lost` loses the tracks removed in earlier frames only:
        // one removed now stays there (and can be found again) for one more frame.
        tracked = pool.joint(pool.joint(tracked.filter { pool[$0].phase == .tracked }, changes.activated), changes.refound)
        lost = pool.subtract(lost, tracked) + changes.lost
        lost.removeAll { removedCount[$0] != nil }
        removeDuplicates()
        remember(changes.removed)
        pool.keep(tracked + lost)

        // FastTrack reports only the tracks matched in this frame.
        let reported = tracked.filter { pool[$0].isActivated && (!isFastTrack || pool[$0].frame == frame) }
        if reported.isEmpty {
            // Ultralytics hides a frame's boxes while a new track waits for confirmation.
            return tracked.contains { !pool[$0].isActivated } ? .hidden : .detections
        }
        return .tracks(reported.map { pool[$0].reported })
    }

    /// A tracked track is updated, a lost one found again (`update`, `re_activate`).
    mutating func apply(_ id: Int, _ detection: Tracklet, _ changes: inout Changes, overGap: Bool = false) {
        if pool[id].phase == .tracked {
            changes.activated.append(id)
            pool[id].update(detection, frame: frame, filter: filter, rules: rules)
        } else {
            changes.refound.append(id)
            if overGap { pool[id].reupdateOverGap(to: detection.xyxy, frame: frame, filter: filter) }
            pool[id].update(detection, frame: frame, filter: filter, rules: rules)
        }
        if isFastTrack { pool[id].occlusion.matched() }
    }

    private func isStale(_ t: Tracklet) -> Bool {
        if isFastTrack, t.occlusion.wasRecentlyOccluded,
           frame - t.occlusion.lastOccludedFrame <= configuration.occlusionReappearWindow {
            return false
        }
        return frame - t.frame > configuration.trackBuffer || expiry.expired(lastSeen: t.frame)
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
            removedTracks.append(view(pool[id], frame: frame))
        }
        list.append(id)
    }

    /// Ultralytics' `remove_duplicate_stracks`: of a tracked and a lost track closer than IoU
    /// 0.85, the one tracked for fewer frames goes.
    private mutating func removeDuplicates() {
        let distance = iouDistance(tracked.map { pool[$0] }, lost.map { pool[$0] })
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

    /// `get_dists`: IoU distance, fused with the detections' confidence when `fuseScore`, plus
    /// OC-SORT's motion-direction cost. Rows are tracks, columns detections, row-major, in
    /// Float32 as NumPy computes them, then as Double as lap takes them.
    private func distances(_ ids: [Int], _ detections: [Tracklet]) -> [Double] {
        var cost = iouDistance(ids.map { pool[$0] }, detections)
        if configuration.fuseScore { fuse(&cost, detections) }
        if isOCSORT { addDirectionCost(&cost, ids, detections) }
        return cost.map(Double.init)
    }

    /// Ultralytics' `fuse_score`: 1 − IoU similarity × the detection's confidence.
    func fuse(_ cost: inout [Float], _ detections: [Tracklet]) {
        guard !detections.isEmpty else { return }
        for k in cost.indices { cost[k] = 1 - (1 - cost[k]) * detections[k % detections.count].score }
    }

    /// `iou_distance` of tracks or detections: probabilistic IoU when both sides are rotated
    /// boxes, else the IoU of their axis-aligned boxes.
    func iouDistance(_ a: [Tracklet], _ b: [Tracklet]) -> [Float] {
        guard let first = a.first, let other = b.first, first.angle != nil, other.angle != nil else {
            return YOLOCore.iouDistance(a.map(\.xyxy), b.map(\.xyxy))
        }
        let p = a.map(\.rotated), q = b.map(\.rotated)
        var out = [Float](repeating: 0, count: p.count * q.count)
        for i in p.indices {
            for j in q.indices { out[i * q.count + j] = 1 - probIoU(p[i], q[j]) }
        }
        return out
    }

    func view(_ t: Tracklet, frame: Int) -> Track {
        let state: Track.State = switch t.phase {
        case .tracked: t.isActivated ? .confirmed : .tentative
        case .lost: .lost
        case .removed, .new: .removed
        }
        let reported = t.reported
        return Track(id: t.id, state: state, box: reported.box, orientedBox: reported.orientedBox, startFrame: t.startFrame,
                     lastSeenFrame: t.frame, framesSinceSeen: frame - t.frame, history: t.history)
    }
}

/// What a tracklet keeps, from its tracker's settings.
struct TrackletRules: Sendable {
    /// Past centres kept in `Track.history`.
    var historyLength = 30
    /// OC-SORT: observations kept (`delta_t` + 2), and `delta_t`; nil for the others.
    var observations: Int?
    var deltaT: Int
    /// FastTrack: filter states kept for the occlusion rollback; nil for the others.
    var occlusionHistory: Int?

    init(_ c: TrackerConfiguration) {
        deltaT = c.deltaT
        if [.ocsort, .deepocsort].contains(c.algorithm) { observations = c.deltaT + 2 }
        if c.algorithm == .fasttrack {
            occlusionHistory = max(c.occlusionVelocityFramesBack, c.occlusionPositionFramesBack) + 4
        }
    }
}

/// Ultralytics' `STrack` / `BOTrack` and the OC-SORT and FastTrack tracks: a detection, and
/// once activated a track.
/// What a track reports of itself: ByteTrack's tracklets and TrackTrack's tracks alike.
protocol ReportableTrack {
    var id: Int { get }
    var angle: Double? { get }
    var score: Float { get }
    var cls: Int { get }
    var name: String { get }
    var originalShape: [Int] { get }
    /// Index of the detection last matched in the input of `update`.
    var detection: Int { get }
    var xyxy: SIMD4<Float> { get }
    var rotated: RotatedBox { get }
}

extension ReportableTrack {
    /// The box as reported: axis-aligned boxes clipped to the image as `Results.update` does,
    /// rotated ones as they are.
    var reported: ReportedTrack {
        if let angle {
            let r = rotated
            let oriented = OrientedBox(xywhr: [r.cx, r.cy, r.w, r.h, Float(angle)], conf: score, cls: cls, name: name,
                                       originalShape: originalShape, id: id)
            return ReportedTrack(box: Box(xyxy: oriented.xyxy, conf: score, cls: cls, name: name, originalShape: originalShape, id: id),
                                 orientedBox: oriented, index: detection)
        }
        let b = clipped(xyxy, to: originalShape)
        return ReportedTrack(box: Box(xyxy: [b[0], b[1], b[2], b[3]], conf: score, cls: cls, name: name,
                                      originalShape: originalShape, id: id), orientedBox: nil, index: detection)
    }
}

struct Tracklet: Sendable, ReportableTrack {
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
    /// A rotated box's angle (its long side along it), nil for axis-aligned boxes.
    var angle: Double?
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
    /// OC-SORT's observations, FastTrack's occlusion state.
    var observations = Observations()
    var occlusion = Occlusion()

    init(_ d: Detection) {
        var xywh = SIMD4<Double>(d.xywh)
        angle = d.angle
        // Rotated boxes in long-edge form, so that equivalent boxes measure alike (in float64,
        // as parse_bboxes gives them).
        if let a = angle, xywh[2] < xywh[3] {
            xywh = SIMD4(xywh[0], xywh[1], xywh[3], xywh[2])
            angle = a + Double.pi / 2
        }
        tlwh = SIMD4<Float>(SIMD4(xywh[0] - xywh[2] / 2, xywh[1] - xywh[3] / 2, xywh[2], xywh[3]))
        (score, cls, name, originalShape, detection) = (d.score, d.cls, d.name, d.originalShape, d.index)
    }

    /// The Kalman filter's measurement of `tlwh` (`tlwh_to_xyah` / `tlwh_to_xywh`, Float32).
    func measurement(_ form: KalmanFilter.Form) -> SIMD4<Double> {
        let w = tlwh[2], h = tlwh[3], x = tlwh[0] + w / 2, y = tlwh[1] + h / 2
        return SIMD4(Double(x), Double(y), Double(form == .xyah ? w / h : w), Double(h))
    }

    /// x1, y1, x2, y2: the filter's box once activated (Double, rounded to Float32 as
    /// `iou_distance` and the results take it), else the detection's.
    var xyxy: SIMD4<Float> {
        guard let b = xyxyDouble else { return SIMD4(tlwh[0], tlwh[1], tlwh[0] + tlwh[2], tlwh[1] + tlwh[3]) }
        return SIMD4<Float>(b)
    }

    /// The filter's box in Double, nil before activation.
    var xyxyDouble: SIMD4<Double>? {
        guard let mean = state?.mean else { return nil }
        let w = form == .xyah ? mean[2] * mean[3] : mean[2], h = mean[3]
        let x = mean[0] - w / 2, y = mean[1] - h / 2
        return SIMD4(x, y, x + w, y + h)
    }

    /// The box for probabilistic IoU: centre, size and angle (`xywha`, Float32).
    var rotated: RotatedBox {
        let b = xyxyDouble.map { SIMD4<Float>(SIMD4(($0[0] + $0[2]) / 2, ($0[1] + $0[3]) / 2, $0[2] - $0[0], $0[3] - $0[1])) }
            ?? SIMD4(tlwh[0] + tlwh[2] / 2, tlwh[1] + tlwh[3] / 2, tlwh[2], tlwh[3])
        return RotatedBox(cx: b[0], cy: b[1], w: b[2], h: b[3], angle: Float(angle ?? 0))
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

    mutating func activate(id: Int, frame: Int, filter: KalmanFilter, rules: TrackletRules) {
        self.id = id
        form = filter.form
        state = filter.initiate(measurement(form))
        phase = .tracked
        isActivated = frame == 1
        self.frame = frame
        startFrame = frame
        record(rules.historyLength)
        if let keep = rules.observations {
            observations.record(xyxy, frame: frame, keep: keep)
            observations.saved = state
        }
        if let capacity = rules.occlusionHistory { occlusion.push(state!, capacity: capacity) }
    }

    /// `update`, or `re_activate` for a lost track: the filter corrected by the detection.
    mutating func update(_ detection: Tracklet, frame: Int, filter: KalmanFilter, rules: TrackletRules) {
        if let keep = rules.observations { observations.record(detection.xyxy, frame: frame, keep: keep) }
        let refound = phase != .tracked
        self.frame = frame
        state = filter.update(state!, measurement: detection.measurement(form))
        phase = .tracked
        isActivated = true
        score = detection.score
        cls = detection.cls
        name = detection.name
        originalShape = detection.originalShape
        self.detection = detection.detection
        // Keep the half-turn form (θ or θ ± π) nearest the track's angle, so that it never flips.
        if let a = angle, let new = detection.angle { angle = new - Double.pi * ((new - a) / Double.pi).rounded(.toNearestOrEven) }
        record(rules.historyLength)
        if rules.observations != nil {
            observations.saved = state
            observations.velocity = observations.direction(deltaT: rules.deltaT)
        }
        if let capacity = rules.occlusionHistory {
            if refound { occlusion = Occlusion(history: occlusion.history) }
            occlusion.push(state!, capacity: capacity)
        }
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
struct TrackPool {
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

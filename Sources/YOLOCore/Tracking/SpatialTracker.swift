import Foundation

/// The spatial lifecycle tracker (`TrackerConfiguration.spatial`): tracks that must prove
/// themselves before they are reported, survive occlusions as stale tracks, and move smoothly.
///
/// - A detection of confidence `minDetectionConfidence` or more left unmatched starts a
///   *candidate*; weaker ones never start a track (they may continue one).
/// - A candidate matched in `confirmationFrames` consecutive frames is *confirmed*: it gets
///   the next ID and is reported from that frame on. A candidate missed once is dropped.
/// - Matching runs in stages, always within a class: first pairs with IoU ≥
///   `highIoUThreshold`; then, for the tracks and detections left, a cost of (1 − IoU + d) / 2,
///   d the distance between the centres over the track's box diagonal, for d ≤ 1 (fast motion);
///   then stale tracks are recaptured by the nearest detection within `recaptureDistance` ×
///   their diagonal of their last position. Each stage is a minimum-cost assignment.
/// - A confirmed track unmatched for `staleFrames` frames is *stale*: still listed in `tracks`,
///   not reported, recaptured under its ID; unmatched for `lostFrames` it is *lost* and gone
///   (in `removedTracks` of that update).
/// - Position, size and confidence are exponential moving averages with weight `smoothing` for
///   the new observation (a recaptured track starts afresh); `maxTracks` caps the live tracks,
///   dropping the lowest-confidence candidates first, then stale tracks, then confirmed ones.
struct SpatialTracker: TrackingEngine {
    let configuration: TrackerConfiguration
    private var live = [Spatial]()
    private(set) var removedTracks: [Track] = []
    private var nextID = 1, nextKey = 1
    private var frame = 0

    init(_ configuration: TrackerConfiguration) { self.configuration = configuration }

    func tracks(frame: Int) -> [Track] {
        live.sorted { ($0.id == 0 ? Int.max : $0.id, $0.key) < ($1.id == 0 ? Int.max : $1.id, $1.key) }
            .map { $0.view(frame: frame) }
    }

    mutating func update(_ detections: [Detection], image: Image?, frame: Int, historyLength: Int, expiry: Expiry) -> EngineReport {
        self.frame = frame
        removedTracks = []
        let c = configuration
        var matched = [Int: Detection](), left = Array(detections.indices)

        // Stage 1: high IoU; stage 2: IoU and centre distance, for the candidates and confirmed tracks.
        let active = live.indices.filter { live[$0].state != .stale }
        var open = active
        for stage in 0..<2 {
            let limit = stage == 0 ? 1 - c.highIoUThreshold : 1
            let iou = pairwiseIoU(open.map { live[$0].xyxy }, left.map { detections[$0].xyxy })
            let assignment = assign(open, left, detections, limit: limit) { i, j, track, detection in
                let iou = Double(iou[i * left.count + j])
                if stage == 0 { return 1 - iou }
                let d = track.distance(to: detection) / track.diagonal
                return d <= 1 ? (1 - iou + d) / 2 : .infinity
            }
            for (t, d) in assignment.matches { matched[open[t]] = detections[left[d]] }
            (open, left) = (assignment.unmatchedRows.map { open[$0] }, assignment.unmatchedColumns.map { left[$0] })
        }
        // Stage 3: stale tracks recaptured near their last position.
        let stale = live.indices.filter { live[$0].state == .stale }
        let recapture = assign(stale, left, detections, limit: 1) { _, _, track, detection in
            let reach = c.recaptureDistance * track.diagonal, d = track.distance(to: detection)
            return d <= reach ? (reach > 0 ? d / reach : 0) : .infinity
        }
        for (t, d) in recapture.matches { matched[stale[t]] = detections[left[d]] }
        left = recapture.unmatchedColumns.map { left[$0] }

        var reported = [Int](), gone = Set<Int>()
        for k in live.indices {
            if let detection = matched[k] {
                live[k].observe(detection, frame: frame, smoothing: live[k].state == .stale ? 1 : c.smoothing,
                                historyLength: historyLength)
                if live[k].state == .candidate, live[k].hits >= c.confirmationFrames { confirm(k) }
                if live[k].state == .stale { live[k].state = .confirmed }
                if live[k].state == .confirmed { reported.append(k) }
                continue
            }
            live[k].misses += 1
            switch live[k].state {
            case .candidate: gone.insert(k)
            case _ where expiry.expired(lastSeen: frame - live[k].misses): gone.insert(k)
            case .confirmed where live[k].misses >= c.staleFrames: live[k].state = .stale
            case .stale where live[k].misses >= c.lostFrames: gone.insert(k)
            default: break
            }
        }
        for d in left where detections[d].score >= Float(c.minDetectionConfidence) {
            live.append(Spatial(detections[d], key: nextKey, frame: frame, historyLength: historyLength))
            nextKey += 1
            if c.confirmationFrames <= 1 {
                confirm(live.count - 1)
                reported.append(live.count - 1)
            }
        }
        if let cap = c.maxTracks, live.count - gone.count > cap {
            // Candidates by confidence, then stale tracks by confidence, then confirmed ones.
            let rank: [Track.State: Int] = [.candidate: 0, .stale: 1, .confirmed: 2]
            let order = live.indices.filter { !gone.contains($0) }
                .sorted { (rank[live[$0].state]!, live[$0].conf, $0) < (rank[live[$1].state]!, live[$1].conf, $1) }
            for k in order.prefix(live.count - gone.count - cap) { gone.insert(k) }
        }
        for k in gone.sorted() where live[k].state != .candidate {
            var track = live[k]
            track.state = .lost
            removedTracks.append(track.view(frame: frame))
        }
        let boxes = reported.filter { !gone.contains($0) }.sorted { live[$0].id < live[$1].id }.map { live[$0].reported }
        live = live.indices.filter { !gone.contains($0) }.map { live[$0] }
        return .tracks(boxes)
    }

    private mutating func confirm(_ k: Int) {
        live[k].state = .confirmed
        live[k].id = nextID
        nextID += 1
    }

    /// A minimum-cost assignment of the tracks at `tracks` to the detections at `detections` of
    /// their class, pairs costing more than `limit` (or infinity) left apart; `cost` takes the
    /// pair's positions in both lists and the pair.
    private func assign(_ tracks: [Int], _ detections: [Int], _ all: [Detection], limit: Double,
                        cost: (Int, Int, Spatial, Detection) -> Double) -> LinearAssignment {
        var costs = [Double](repeating: .infinity, count: tracks.count * detections.count)
        live.withUnsafeBufferPointer { live in
            all.withUnsafeBufferPointer { all in
                for (i, t) in tracks.enumerated() {
                    for (j, d) in detections.enumerated() where live[t].cls == all[d].cls {
                        costs[i * detections.count + j] = cost(i, j, live[t], all[d])
                    }
                }
            }
        }
        return linearAssignment(costs, rows: tracks.count, columns: detections.count, costLimit: limit)
    }
}

/// A spatial track: its smoothed box and confidence, and its matching record.
private struct Spatial: Sendable {
    var key: Int
    var id = 0
    var state = Track.State.candidate
    /// Smoothed centre x, centre y, width, height.
    var xywh: SIMD4<Double>
    var conf: Double
    var cls: Int, name: String, originalShape: [Int]
    var detection: Int
    /// Consecutive frames matched and unmatched.
    var hits = 1, misses = 0
    var startFrame: Int, lastSeenFrame: Int
    var history = [SIMD2<Float>]()

    init(_ d: Detection, key: Int, frame: Int, historyLength: Int) {
        self.key = key
        xywh = SIMD4<Double>(d.xywh)
        conf = Double(d.score)
        (cls, name, originalShape, detection) = (d.cls, d.name, d.originalShape, d.index)
        (startFrame, lastSeenFrame) = (frame, frame)
        record(historyLength)
    }

    var xyxy: SIMD4<Float> {
        let centre = SIMD4<Double>(xywh[0], xywh[1], xywh[0], xywh[1]), half = SIMD4<Double>(-xywh[2], -xywh[3], xywh[2], xywh[3]) / 2
        return SIMD4<Float>(centre + half)
    }

    var diagonal: Double { max((xywh[2] * xywh[2] + xywh[3] * xywh[3]).squareRoot(), 1e-9) }

    func distance(to d: Detection) -> Double {
        let dx = Double(d.xywh[0]) - xywh[0], dy = Double(d.xywh[1]) - xywh[1]
        return (dx * dx + dy * dy).squareRoot()
    }

    mutating func observe(_ d: Detection, frame: Int, smoothing s: Double, historyLength: Int) {
        xywh = s * SIMD4<Double>(d.xywh) + (1 - s) * xywh
        conf = s * Double(d.score) + (1 - s) * conf
        (cls, name, originalShape, detection) = (d.cls, d.name, d.originalShape, d.index)
        hits = misses == 0 ? hits + 1 : 1
        misses = 0
        lastSeenFrame = frame
        record(historyLength)
    }

    private mutating func record(_ historyLength: Int) {
        history.append(SIMD2(Float(xywh[0]), Float(xywh[1])))
        if history.count > historyLength { history.removeFirst(history.count - max(historyLength, 0)) }
    }

    var reported: ReportedTrack {
        let b = xyxy
        return ReportedTrack(box: Box(xyxy: [b[0], b[1], b[2], b[3]], conf: Float(conf), cls: cls, name: name,
                                      originalShape: originalShape, id: id == 0 ? nil : id), orientedBox: nil, index: detection)
    }

    func view(frame: Int) -> Track {
        Track(id: id, state: state, box: reported.box, orientedBox: nil, startFrame: startFrame, lastSeenFrame: lastSeenFrame,
              framesSinceSeen: frame - lastSeenFrame, history: history)
    }
}

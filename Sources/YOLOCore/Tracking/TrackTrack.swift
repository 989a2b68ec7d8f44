import Foundation

/// Ultralytics' `TRACKTRACK` (Track-Perspective Association and Track-Aware Initialization,
/// CVPR 2025) without ReID: every confident or weak detection against the tracked and lost
/// tracks at once, by a cost of height-modulated IoU, confidence change and corner-motion
/// angle, matched greedily (mutually nearest pairs under a threshold that falls each round);
/// tracks confirmed after `minTrackLength` matches; new tracks only where no track or stronger
/// detection overlaps; the tracks warped by the camera's motion between frames first.
struct TrackTrack: TrackingEngine {
    let configuration: TrackerConfiguration
    private let filter = KalmanFilter(.xywh)
    private var motion: CameraMotionEstimator?
    private var frame = 0
    private(set) var removedTracks: [Track] = []
    private var all = [Int: Track3]()
    /// Ultralytics' `tracked_stracks`, `lost_stracks` and the last 1000 IDs of `removed_stracks`.
    private var tracked = [Int](), lost = [Int](), removed = [Int]()
    private var nextID = 1
    private var historyLength = 30

    /// The corners of an x1, y1, x2, y2 box, left-top, left-bottom, right-top, right-bottom:
    /// the indices of their x and y.
    private static let cornerX = [0, 0, 2, 2], cornerY = [1, 3, 1, 3]
    /// Frames back of the box the corner motion is measured from.
    private static let deltaT = 3

    init(_ configuration: TrackerConfiguration) {
        self.configuration = configuration
        if configuration.cameraMotion == .sparseOptFlow { motion = CameraMotionEstimator() }
    }

    func tracks(frame: Int) -> [Track] {
        (tracked + lost).compactMap { all[$0] }.filter { $0.phase != .removed }.map { view($0, frame: frame) }
    }

    mutating func update(_ input: [Detection], image: Image?, frame: Int, historyLength: Int, expiry: Expiry) -> EngineReport {
        self.frame = frame
        self.historyLength = historyLength
        removedTracks = []
        let high = Float(configuration.trackHighThreshold), low = Float(configuration.trackLowThreshold)
        let strong = input.filter { $0.score >= high }.map(Track3.init)
        let weak = input.filter { $0.score > low && $0.score < high }.map(Track3.init)

        // Frame-1 tracks are reported but still new: they stay unconfirmed here.
        let unconfirmed = tracked.filter { all[$0]!.phase != .tracked }
        let pool = joint(tracked.filter { all[$0]!.phase == .tracked }, lost)
        if let image, motion != nil, let warp = motion?.estimate(image) {
            for id in pool + unconfirmed { all[id]!.warp(by: warp) }
        }
        for id in pool + unconfirmed { all[id]!.predict(filter) }

        var activated = [Int](), refound = [Int](), newlyLost = [Int](), newlyRemoved = [Int]()
        let detections = strong + weak
        var cost = costs(pool, detections)
        if !weak.isEmpty {
            for r in pool.indices {
                for c in strong.count..<detections.count {
                    cost[r * detections.count + c] = min(max(cost[r * detections.count + c] + Float(configuration.lowConfidencePenalty), 0), 1)
                }
            }
        }
        let first = Self.associate(cost, rows: pool.count, columns: detections.count,
                                   threshold: configuration.matchThreshold, step: configuration.reduceStep)
        for (t, d) in first.matches {
            let id = pool[t]
            if all[id]!.phase == .tracked {
                all[id]!.update(detections[d], frame: frame, filter: filter, minLength: configuration.minTrackLength, historyLength: historyLength)
                activated.append(id)
            } else {
                all[id]!.reactivate(detections[d], frame: frame, filter: filter, historyLength: historyLength)
                refound.append(id)
            }
        }
        for t in first.unmatchedRows where all[pool[t]]!.phase != .lost {
            all[pool[t]]!.phase = .lost
            newlyLost.append(pool[t])
        }

        // Unconfirmed tracks against the confident detections left.
        var leftover = first.unmatchedColumns.filter { $0 < strong.count }.map { detections[$0] }
        if !unconfirmed.isEmpty && !leftover.isEmpty {
            let second = Self.associate(costs(unconfirmed, leftover), rows: unconfirmed.count, columns: leftover.count,
                                        threshold: configuration.matchThreshold, step: configuration.reduceStep)
            for (t, d) in second.matches {
                all[unconfirmed[t]]!.update(leftover[d], frame: frame, filter: filter, minLength: configuration.minTrackLength,
                                            historyLength: historyLength)
                activated.append(unconfirmed[t])
            }
            for t in second.unmatchedRows { markRemoved(unconfirmed[t], &newlyRemoved) }
            leftover = second.unmatchedColumns.map { leftover[$0] }
        } else {
            for id in unconfirmed { markRemoved(id, &newlyRemoved) }
        }

        // A looser rebinding of tracks that were lost already (off when lostMatchThreshold is 0).
        if configuration.lostMatchThreshold > 0 && !leftover.isEmpty {
            let stillLost = pool.filter { all[$0]!.phase == .lost && !newlyLost.contains($0) }
            if !stillLost.isEmpty {
                let third = Self.associate(costs(stillLost, leftover), rows: stillLost.count, columns: leftover.count,
                                           threshold: configuration.lostMatchThreshold, step: configuration.reduceStep)
                for (t, d) in third.matches {
                    all[stillLost[t]]!.reactivate(leftover[d], frame: frame, filter: filter, historyLength: historyLength)
                    refound.append(stillLost[t])
                }
                leftover = third.unmatchedColumns.map { leftover[$0] }
            }
        }

        // Track-aware initialization: new tracks from the detections no track or stronger
        // detection overlaps.
        let active = (tracked.filter { all[$0]!.phase == .tracked } + activated).map { all[$0]!.xyxy }
        for (k, allowed) in allowedNewTracks(active, leftover).enumerated() where allowed {
            var track = leftover[k]
            track.activate(id: nextID, frame: frame, filter: filter, minLength: configuration.minTrackLength,
                           historyLength: historyLength)
            all[nextID] = track
            activated.append(nextID)
            nextID += 1
        }
        for id in lost where frame - all[id]!.frame > configuration.trackBuffer || expiry.expired(lastSeen: all[id]!.frame) {
            markRemoved(id, &newlyRemoved)
        }

        // Ultralytics' merge_track_pools; a track removed now stays in `lost` for one more frame.
        tracked = joint(joint(tracked.filter { all[$0]!.phase == .tracked }, activated), refound)
        let trackedSet = Set(tracked), removedSet = Set(removed)
        lost = (lost.filter { !trackedSet.contains($0) } + newlyLost).filter { !removedSet.contains($0) }
        removeDuplicates()
        removed += newlyRemoved
        if removed.count > 1000 { removed.removeFirst(removed.count - 1000) }
        let alive = Set(tracked + lost)
        all = all.filter { alive.contains($0.key) }

        let reported = tracked.filter { all[$0]!.isActivated && all[$0]!.frame == frame }
        if reported.isEmpty { return tracked.contains { !all[$0]!.isActivated } ? .hidden : .detections }
        return .tracks(reported.map { all[$0]!.reported })
    }

    private func joint(_ a: [Int], _ b: [Int]) -> [Int] {
        let present = Set(a)
        return a + b.filter { !present.contains($0) }
    }

    private mutating func markRemoved(_ id: Int, _ list: inout [Int]) {
        if all[id]!.phase != .removed {
            all[id]!.phase = .removed
            removedTracks.append(view(all[id]!, frame: frame))
        }
        list.append(id)
    }

    /// `remove_duplicate_stracks`: of a tracked and a lost track closer than IoU 0.85, the one
    /// tracked for fewer frames goes.
    private mutating func removeDuplicates() {
        let a = tracked.map { all[$0]! }, b = lost.map { all[$0]! }
        var dropTracked = Set<Int>(), dropLost = Set<Int>()
        let distance: [Float]
        if let p = a.first, let q = b.first, p.angle != nil, q.angle != nil {
            distance = a.flatMap { t in b.map { 1 - probIoU(t.rotated, $0.rotated) } }
        } else {
            distance = iouDistance(a.map(\.xyxy), b.map(\.xyxy))
        }
        for p in a.indices {
            for q in b.indices where distance[p * b.count + q] < 0.15 {
                if a[p].frame - a[p].startFrame > b[q].frame - b[q].startFrame { dropLost.insert(q) } else { dropTracked.insert(p) }
            }
        }
        tracked = tracked.indices.filter { !dropTracked.contains($0) }.map { tracked[$0] }
        lost = lost.indices.filter { !dropLost.contains($0) }.map { lost[$0] }
    }

    /// `_cost_matrix` (tracks × detections, Float32): 1 − height IoU × IoU, plus
    /// `confidenceWeight` × |the track's extrapolated confidence − the detection's|, plus for
    /// pairs with IoU above 0.1 `angleWeight` × the corner-angle distance; 1 for the others;
    /// clipped to 0…1.
    private func costs(_ ids: [Int], _ detections: [Track3]) -> [Float] {
        let tracks = ids.map { all[$0]! }, n = detections.count
        guard !tracks.isEmpty, n > 0 else { return [] }
        let a = tracks.map(\.xyxy), b = detections.map(\.xyxy)
        let iou = pairwiseIoU(a, b)
        var cost = [Float](repeating: 0, count: tracks.count * n)
        for (i, p) in a.enumerated() {
            let projected = tracks[i].score + (tracks[i].score - tracks[i].previousScore)
            for (j, q) in b.enumerated() {
                let over = min(p[3], q[3]) - max(p[1], q[1]), union = max(p[3], q[3]) - min(p[1], q[1])
                let heightIoU = min(max(over / (union + 1e-9), 0), 1)
                var c = 1 - heightIoU * iou[i * n + j]
                c += Float(configuration.confidenceWeight) * abs(projected - detections[j].score)
                if iou[i * n + j] > 0.1 {
                    c = Float(Double(c) + configuration.angleWeight * angleDistance(tracks[i], detections[j]))
                } else {
                    c = 1
                }
                cost[i * n + j] = min(max(c, 0), 1)
            }
        }
        return cost
    }

    /// `_angle_distance` of one pair: the mean over the four corners of the angle between the
    /// track's corner motion and the motion from its box `deltaT` frames back to the
    /// detection's, over π, times the detection's confidence.
    private func angleDistance(_ track: Track3, _ detection: Track3) -> Double {
        let from = track.historyBox(frame: frame, back: Self.deltaT), to = SIMD4<Double>(detection.xyxy)
        let delta = to - from
        var sum = 0.0
        for k in 0..<4 {
            let dx = delta[Self.cornerX[k]], dy = delta[Self.cornerY[k]], norm = (dx * dx + dy * dy).squareRoot() + 1e-5
            let v = track.velocity[k]
            let dot = Double(v.x) * (dx / norm) + Double(v.y) * (dy / norm)
            sum += abs(Foundation.acos(min(max(dot, -1), 1)))
        }
        return sum / 4 / Double.pi * Double(detection.score)
    }

    /// `_track_aware_nms`: which detections may start a track: confidence above
    /// `newTrackThreshold`, IoU with every active track at most `initializationIoU`, and not
    /// overlapping a stronger allowed detection by more than it.
    private func allowedNewTracks(_ active: [SIMD4<Float>], _ detections: [Track3]) -> [Bool] {
        var allow = detections.map { $0.score > Float(configuration.newTrackThreshold) }
        guard active.count + detections.count >= 2 else { return allow }
        let boxes = detections.map(\.xyxy), limit = Float(configuration.initializationIoU)
        if !active.isEmpty {
            let overlap = pairwiseIoU(boxes, active)
            for d in boxes.indices where overlap[d * active.count ..< (d + 1) * active.count].max()! > limit { allow[d] = false }
        }
        let overlap = pairwiseIoU(boxes, boxes)
        // NumPy's argsort of few scores is stable; reversed, ties go last index first.
        let order = detections.indices.sorted { (detections[$0].score, $0) < (detections[$1].score, $1) }.reversed()
        for i in order where allow[i] {
            for j in boxes.indices where j != i && overlap[i * boxes.count + j] > limit { allow[j] = false }
        }
        return allow
    }

    /// `_iterative_associate`: each round matches the pairs that are each other's nearest with
    /// a cost under the threshold, then lowers the threshold by `step`, until a round matches
    /// none. Unmatched rows and columns ascending.
    static func associate(_ cost: [Float], rows: Int, columns: Int, threshold: Double, step: Double) -> LinearAssignment {
        var cost = cost, threshold = threshold, matches = [(row: Int, column: Int)]()
        var rowDone = [Bool](repeating: false, count: rows), columnDone = [Bool](repeating: false, count: columns)
        while rows > 0 && columns > 0 {
            // np.argmin: the first minimum (an all-infinite row or column gives index 0).
            var nearestColumn = [Int](repeating: 0, count: rows), nearestRow = [Int](repeating: 0, count: columns)
            for r in 0..<rows {
                for c in 0..<columns {
                    if cost[r * columns + c] < cost[r * columns + nearestColumn[r]] { nearestColumn[r] = c }
                    if cost[r * columns + c] < cost[nearestRow[c] * columns + c] { nearestRow[c] = r }
                }
            }
            let round = (0..<rows).filter {
                nearestRow[nearestColumn[$0]] == $0 && cost[$0 * columns + nearestColumn[$0]] < Float(threshold)
            }
            if round.isEmpty { break }
            for r in round {
                let c = nearestColumn[r]
                matches.append((r, c))
                (rowDone[r], columnDone[c]) = (true, true)
                for k in 0..<columns { cost[r * columns + k] = .infinity }
                for k in 0..<rows { cost[k * columns + c] = .infinity }
            }
            threshold -= step
        }
        return LinearAssignment(matches: matches, unmatchedRows: (0..<rows).filter { !rowDone[$0] },
                                unmatchedColumns: (0..<columns).filter { !columnDone[$0] })
    }

    private func view(_ t: Track3, frame: Int) -> Track {
        let state: Track.State = switch t.phase {
        case .tracked: t.isActivated ? .confirmed : .tentative
        case .new: t.isActivated ? .confirmed : .tentative
        case .lost: .lost
        case .removed: .removed
        }
        let reported = t.reported
        return Track(id: t.id, state: state, box: reported.box, orientedBox: reported.orientedBox, startFrame: t.startFrame,
                     lastSeenFrame: t.frame, framesSinceSeen: frame - t.frame, history: t.history)
    }
}

/// Ultralytics' `TTSTrack`: a detection, and once activated a track with a full-covariance
/// xywh Kalman state (warped by camera motion), its previous confidence and corner motion.
private struct Track3: Sendable, ReportableTrack {
    enum Phase { case new, tracked, lost, removed }

    var id = 0
    var phase = Phase.new
    var isActivated = false
    var state: KalmanFilter.DenseState?
    var tlwh: SIMD4<Float>
    var angle: Double?
    var score: Float, previousScore: Float
    var cls: Int, name: String, originalShape: [Int], detection: Int
    var frame = 0, startFrame = 0, matches = 0
    /// The unit motion of each corner, averaged over the last `deltaT` frames.
    var velocity = [SIMD2<Float>](repeating: .zero, count: 4)
    /// The last boxes by frame (at most deltaT + 1), oldest first.
    var boxes = [(frame: Int, box: SIMD4<Double>)]()
    var history = [SIMD2<Float>]()

    init(_ d: Detection) {
        let t = Tracklet(d)
        (tlwh, angle, score, previousScore) = (t.tlwh, t.angle, d.score, d.score)
        (cls, name, originalShape, detection) = (d.cls, d.name, d.originalShape, d.index)
    }

    var xyxyDouble: SIMD4<Double> {
        guard let m = state?.mean else { return SIMD4<Double>(SIMD4(tlwh[0], tlwh[1], tlwh[0] + tlwh[2], tlwh[1] + tlwh[3])) }
        let x = m[0] - m[2] / 2, y = m[1] - m[3] / 2
        return SIMD4(x, y, x + m[2], y + m[3])
    }

    var xyxy: SIMD4<Float> {
        guard state != nil else { return SIMD4(tlwh[0], tlwh[1], tlwh[0] + tlwh[2], tlwh[1] + tlwh[3]) }
        return SIMD4<Float>(xyxyDouble)
    }

    var rotated: RotatedBox {
        let b = xyxyDouble
        return RotatedBox(cx: Float((b[0] + b[2]) / 2), cy: Float((b[1] + b[3]) / 2), w: Float(b[2] - b[0]), h: Float(b[3] - b[1]),
                          angle: Float(angle ?? 0))
    }

    private var measurement: SIMD4<Double> {
        SIMD4(Double(tlwh[0] + tlwh[2] / 2), Double(tlwh[1] + tlwh[3] / 2), Double(tlwh[2]), Double(tlwh[3]))
    }

    /// `get_history_box`: the box `back` frames before `frame`, else the latest, else the current.
    func historyBox(frame: Int, back: Int) -> SIMD4<Double> {
        boxes.first { $0.frame == frame - back }?.box ?? boxes.last?.box ?? xyxyDouble
    }

    private mutating func remember(_ box: SIMD4<Double>, historyLength: Int) {
        boxes.append((frame, box))
        if boxes.count > 4 { boxes.removeFirst() }
        let b = xyxy
        history.append(SIMD2((b[0] + b[2]) / 2, (b[1] + b[3]) / 2))
        if history.count > historyLength { history.removeFirst(history.count - max(historyLength, 0)) }
    }

    /// `multi_gmc`: centre and velocity rotated, scaled and (the centre) moved; sizes scaled by
    /// the rotation's absolute values (a rotated box's by its scale, its angle turned).
    mutating func warp(by h: CameraMotionEstimator.Warp) {
        guard var s = state else { return }
        var m = [Double](repeating: 0, count: 64)
        let scale = (h.a * h.a + h.c * h.c).squareRoot()
        let size = angle != nil ? [scale, 0, 0, scale] : [abs(h.a), abs(h.b), abs(h.c), abs(h.d)]
        for block in 0..<4 {
            let r = block % 2 == 0 ? [h.a, h.b, h.c, h.d] : size
            let o = 2 * block
            (m[o * 8 + o], m[o * 8 + o + 1], m[(o + 1) * 8 + o], m[(o + 1) * 8 + o + 1]) = (r[0], r[1], r[2], r[3])
        }
        var mean = SIMD8<Double>.zero
        for r in 0..<8 { for c in 0..<8 { mean[r] += m[r * 8 + c] * s.mean[c] } }
        mean[0] += h.tx
        mean[1] += h.ty
        var mp = [Double](repeating: 0, count: 64), p = [Double](repeating: 0, count: 64)
        for r in 0..<8 { for c in 0..<8 { for k in 0..<8 { mp[r * 8 + c] += m[r * 8 + k] * s.covariance[k * 8 + c] } } }
        for r in 0..<8 { for c in 0..<8 { for k in 0..<8 { p[r * 8 + c] += mp[r * 8 + k] * m[c * 8 + k] } } }
        (s.mean, s.covariance) = (mean, p)
        state = s
        if let a = angle { angle = a + atan2(h.c, h.a) }
    }

    /// `multi_predict`: tracks not tracked keep their size.
    mutating func predict(_ filter: KalmanFilter) {
        guard var s = state else { return }
        if phase != .tracked { (s.mean[6], s.mean[7]) = (0, 0) }
        state = filter.predict(s)
    }

    mutating func activate(id: Int, frame: Int, filter: KalmanFilter, minLength: Int, historyLength: Int) {
        self.id = id
        state = filter.initiateDense(measurement)
        self.frame = frame
        startFrame = frame
        matches = 0
        phase = minLength <= 1 ? .tracked : .new
        isActivated = frame == 1 || phase == .tracked
        remember(xyxyDouble, historyLength: historyLength)
    }

    /// `re_activate`: a lost track found again.
    mutating func reactivate(_ d: Track3, frame: Int, filter: KalmanFilter, historyLength: Int) {
        previousScore = score
        state = filter.update(state!, measurement: d.measurement, confidence: Double(d.score))
        self.frame = frame
        remember(xyxyDouble, historyLength: historyLength)
        take(d)
        matches = 0
        (phase, isActivated) = (.tracked, true)
    }

    /// `update`: a matched track, its corner motion measured over the last deltaT frames.
    mutating func update(_ d: Track3, frame: Int, filter: KalmanFilter, minLength: Int, historyLength: Int) {
        self.frame = frame
        matches += 1
        previousScore = score
        state = filter.update(state!, measurement: d.measurement, confidence: Double(d.score))
        let current = SIMD4<Double>(d.xyxy)
        remember(current, historyLength: historyLength)
        var v = [SIMD2<Double>](repeating: .zero, count: 4)
        for back in 1...3 {
            let delta = current - historyBox(frame: frame, back: back)
            for k in 0..<4 {
                let dx = delta[[0, 0, 2, 2][k]], dy = delta[[1, 3, 1, 3][k]], norm = (dx * dx + dy * dy).squareRoot() + 1e-5
                // Accumulated in Float32, as NumPy adds into the float32 array.
                v[k] = SIMD2(Double(Float(v[k].x + dx / norm / Double(back))), Double(Float(v[k].y + dy / norm / Double(back))))
            }
        }
        velocity = v.map { SIMD2<Float>(Float($0.x) / 3, Float($0.y) / 3) }
        take(d)
        if phase == .tracked || matches + 1 >= minLength { (phase, isActivated) = (.tracked, true) }
    }

    private mutating func take(_ d: Track3) {
        (score, cls, name, originalShape, detection) = (d.score, d.cls, d.name, d.originalShape, d.detection)
        if let a = angle, let new = d.angle { angle = new - Double.pi * ((new - a) / Double.pi).rounded(.toNearestOrEven) }
    }
}

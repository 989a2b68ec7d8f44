import Foundation

/// Ultralytics' `OCSORT` (and `DeepOCSORT`, which without ReID and camera-motion compensation
/// runs the same steps with its own thresholds) on `ByteTracker`'s steps:
/// - observation-centric momentum: the first association adds `inertia` × the angle between a
///   track's motion direction and the direction from its last observation to each detection;
/// - observation-centric recovery: tracks left unmatched (tracked ones, then lost ones) try the
///   detections left by the IoU of their last observation;
/// - observation-centric re-update: a lost track found that way replays its filter over the
///   gap on observations interpolated between its last one and the new detection.
/// Without `useByte` the low-confidence boxes take no part.
extension ByteTracker {
    /// The recovery passes after the first association; returns the tracks and detections
    /// still unmatched, as indices into `candidates` and `detections`.
    mutating func recoverByLastObservation(_ candidates: [Int], _ detections: [Tracklet], _ unmatchedTracks: [Int],
                                           _ unmatchedDetections: [Int], _ changes: inout Changes) -> ([Int], [Int]) {
        guard !unmatchedDetections.isEmpty else { return (unmatchedTracks, unmatchedDetections) }
        let trackedFirst = unmatchedTracks.filter { pool[candidates[$0]].phase == .tracked }
        let others = unmatchedTracks.filter { pool[candidates[$0]].phase != .tracked }
        let (tracksLeft1, detectionsLeft1) = recover(trackedFirst.map { candidates[$0] }, unmatchedDetections.map { detections[$0] },
                                                     &changes)
        let (tracksLeft2, detectionsLeft2) = recover(others.map { candidates[$0] },
                                                     detectionsLeft1.map { detections[unmatchedDetections[$0]] }, &changes)
        return (tracksLeft1.map { trackedFirst[$0] } + tracksLeft2.map { others[$0] },
                detectionsLeft2.map { unmatchedDetections[detectionsLeft1[$0]] })
    }

    /// One recovery pass (`_ocr_associate`): the unmatched tracks and detections left, as local indices.
    private mutating func recover(_ ids: [Int], _ detections: [Tracklet], _ changes: inout Changes) -> ([Int], [Int]) {
        guard !ids.isEmpty, !detections.isEmpty else { return (Array(ids.indices), Array(detections.indices)) }
        // Rotated tracks keep no rotated observation: their predicted box stands in.
        let rotated = pool[ids[0]].angle != nil
        var cost: [Float]
        if rotated {
            cost = iouDistance(ids.map { pool[$0] }, detections)
        } else {
            let last = ids.map { pool[$0].observations.last[0] >= 0 ? pool[$0].observations.last : pool[$0].xyxy }
            cost = YOLOCore.iouDistance(last, detections.map(\.xyxy))
        }
        if configuration.fuseScore { fuse(&cost, detections) }
        let a = linearAssignment(cost.map(Double.init), rows: ids.count, columns: detections.count,
                                 costLimit: configuration.matchThreshold)
        for (t, d) in a.matches { apply(ids[t], detections[d], &changes, overGap: true) }
        return (a.unmatchedRows, a.unmatchedColumns)
    }

    /// `_velocity_direction_cost` × `inertia` added to `cost` (tracks × detections): for a
    /// track with a direction and a last observation, the angle between its direction and the
    /// one from that observation's centre to each detection's, over π.
    func addDirectionCost(_ cost: inout [Float], _ ids: [Int], _ detections: [Tracklet]) {
        guard !detections.isEmpty else { return }
        let centres = detections.map { Observations.centre($0.xyxy) }, inertia = Float(configuration.inertia)
        for (i, id) in ids.enumerated() {
            let observations = pool[id].observations
            guard let velocity = observations.velocity, observations.last[0] >= 0 else { continue }
            let centre = Observations.centre(observations.last)
            for (j, c) in centres.enumerated() {
                let direction = c - centre, norm = (direction * direction).sum().squareRoot()
                guard norm > 1e-6 else { continue }
                let dot = min(max(((direction / norm) * velocity).sum(), -1), 1)
                cost[i * detections.count + j] += inertia * (Foundation.acos(dot) / Float.pi)
            }
        }
    }
}

/// An OC-SORT track's observations: its last detections by frame, the last one, its motion
/// direction, and the filter's state at the last observation.
struct Observations: Sendable {
    /// The last detections (x1, y1, x2, y2) by frame, oldest first.
    private(set) var boxes = [(frame: Int, box: SIMD4<Float>)]()
    /// The last observation; x1 = −1 before the first.
    private(set) var last = SIMD4<Float>(repeating: -1)
    /// The unit direction of motion over the last `deltaT` frames, nil before two observations.
    var velocity: SIMD2<Float>?
    /// The filter's state right after the last observation.
    var saved: KalmanFilter.State?

    static func centre(_ b: SIMD4<Float>) -> SIMD2<Float> { SIMD2((b[0] + b[2]) / 2, (b[1] + b[3]) / 2) }

    /// `_record_observation`, keeping the last `keep` frames.
    mutating func record(_ box: SIMD4<Float>, frame: Int, keep: Int) {
        last = box
        if let k = boxes.firstIndex(where: { $0.frame == frame }) { boxes[k].box = box } else { boxes.append((frame, box)) }
        if boxes.count > keep { boxes.removeFirst(boxes.count - keep) }
    }

    /// `_compute_velocity`: from the latest observation at least `deltaT` frames before the last
    /// one (else the earliest) to the last one, normalized.
    func direction(deltaT: Int) -> SIMD2<Float>? {
        guard boxes.count >= 2, let current = boxes.last else { return nil }
        let previous = boxes.last { $0.frame < current.frame - deltaT + 1 } ?? boxes[0]
        guard previous.frame != current.frame else { return nil }
        let d = Self.centre(current.box) - Self.centre(previous.box), norm = (d * d).sum().squareRoot()
        return norm < 1e-6 ? .zero : d / norm
    }
}

extension Tracklet {
    /// `apply_oru`: before a lost track takes `box` in `frame`, its filter goes back to the
    /// state of its last observation and steps over the gap on observations interpolated
    /// linearly between that one and `box`, then predicts the current frame.
    mutating func reupdateOverGap(to box: SIMD4<Float>, frame: Int, filter: KalmanFilter) {
        guard let saved = observations.saved, let last = observations.boxes.last else { return }
        let gap = frame - last.frame
        guard gap > 1 else { return }
        var s = saved
        for t in 1..<gap {
            let alpha = Double(t) / Double(gap)
            let v = Float(1 - alpha) * last.box + Float(alpha) * box
            let w = v[2] - v[0], h = v[3] - v[1]
            let measurement = SIMD4(Double(v[0] + w / 2), Double(v[1] + h / 2), Double(form == .xyah ? w / h : w), Double(h))
            s = filter.update(filter.predict(s), measurement: measurement)
        }
        state = filter.predict(s)
    }
}

/// Ultralytics' `FASTTracker` on `ByteTracker`'s steps: a tracked track left unmatched whose
/// area an active track covers by more than `occlusionCoverThreshold` is occluded: its filter
/// rolls back to an earlier state, its box grows and its motion slows once, and it stays
/// tracked (unreported) for up to `occludedFramesBeforeLost` frames. Any unmatched track stays
/// tracked for two frames before it is lost; one lost while occluded stays findable for
/// `occlusionReappearWindow` frames. A new track is not started on top of an active one.
extension ByteTracker {
    /// `_handle_occlusions` on the tracked tracks left unmatched after the second association.
    mutating func handleOcclusions(_ unmatched: [Int], _ changes: inout Changes) {
        guard !unmatched.isEmpty else { return }
        let active = changes.activated.filter { pool[$0].isActivated && !pool[$0].occlusion.isOccluded }
        let coverage = intersectionOverArea(active.map { pool[$0].xyxy }, unmatched.map { pool[$0].xyxy })
        for (u, id) in unmatched.enumerated() {
            // The largest share of the track's area covered by another active track.
            var cover: Float = 0
            for (a, other) in active.enumerated() where other != id { cover = max(cover, coverage[a * unmatched.count + u]) }
            var t = pool[id]
            t.occlusion.unmatched += 1
            if cover > Float(configuration.occlusionCoverThreshold), !t.occlusion.isOccluded, t.phase == .tracked {
                t.occlusion.isOccluded = true
                t.occlusion.occludedFrames = 1
                t.occlusion.lastOccludedFrame = frame
                t.occlusion.wasRecentlyOccluded = true
                if var s = t.state, !t.occlusion.history.isEmpty {
                    let history = t.occlusion.history
                    if history.count >= configuration.occlusionVelocityFramesBack {
                        s.mean.highHalf = history[history.count - configuration.occlusionVelocityFramesBack].mean.highHalf
                    }
                    if history.count >= configuration.occlusionPositionFramesBack {
                        let back = history[history.count - configuration.occlusionPositionFramesBack]
                        s = KalmanFilter.State(mean: SIMD8(lowHalf: back.mean.lowHalf, highHalf: s.mean.highHalf), covarianceOf: back)
                    }
                    s.mean[3] *= configuration.occlusionEnlargement
                    s.mean.highHalf *= configuration.occlusionDamping
                    t.state = s
                }
            } else if t.occlusion.isOccluded {
                t.occlusion.occludedFrames += 1
            }
            if t.occlusion.wasRecentlyOccluded, frame - t.occlusion.lastOccludedFrame > configuration.occlusionReappearWindow {
                t.occlusion.wasRecentlyOccluded = false
            }
            // Occluded tracks get a grace period before they are lost.
            let lose = t.occlusion.unmatched > 2
                && (!t.occlusion.isOccluded || t.occlusion.occludedFrames > configuration.occludedFramesBeforeLost)
            if lose { t.phase = .lost }
            pool[id] = t
            if lose { changes.lost.append(id) }
        }
    }

    /// The boxes a new FastTrack track must not sit on: the tracks matched or found in this
    /// frame, and those still tracked since the last.
    func activeBoxes(_ changes: Changes) -> [SIMD4<Float>] {
        (changes.activated + changes.refound).filter { pool[$0].isActivated }.map { pool[$0].xyxy }
            + tracked.filter { pool[$0].phase == .tracked }.map { pool[$0].xyxy }
    }

    /// Whether `box` overlaps one of `boxes` by `newTrackSuppressionIoU` or more (1 turns it off).
    func suppressed(_ box: SIMD4<Float>, by boxes: [SIMD4<Float>]) -> Bool {
        guard configuration.newTrackSuppressionIoU < 1, !boxes.isEmpty else { return false }
        return pairwiseIoU([box], boxes).contains { $0 >= Float(configuration.newTrackSuppressionIoU) }
    }
}

/// A FastTrack track's occlusion state and its recent filter states.
struct Occlusion: Sendable {
    /// The filter's state after each of the last matches, oldest first.
    var history = [KalmanFilter.State]()
    var unmatched = 0
    var isOccluded = false
    var occludedFrames = 0
    var lastOccludedFrame = -1
    var wasRecentlyOccluded = false

    mutating func push(_ state: KalmanFilter.State, capacity: Int) {
        history.append(state)
        if history.count > capacity { history.removeFirst(history.count - capacity) }
    }

    /// A match clears the occlusion (`_apply_match`).
    mutating func matched() {
        (isOccluded, unmatched, occludedFrames) = (false, 0, 0)
    }
}

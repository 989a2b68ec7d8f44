/// Strided depthwise convolution (groups == Cin == Cout) of channels `channels`, output rows `rows` of
/// one image from their phase planes (the block starting at `rows.lowerBound`):
/// y[c] = epilogue(Σ over taps t of weight[c, t] · tap t's view of the planes), with `taps` the
/// offsets of `PhasePlanes.rowOffsets(channels: 1, …)`. Every tap of a 48- or 16-column run of
/// an output row is summed in registers and stored once.
func depthwiseConv2d(_ planes: UnsafePointer<Float>, _ phases: PhasePlanes, taps: UnsafePointer<Int>,
                     weight: UnsafePointer<Float>, _ y: UnsafeMutablePointer<Float>, channels: Range<Int>,
                     rows: Range<Int>, ho: Int, wo: Int, _ epilogue: Epilogue) {
    let count = phases.taps
    for c in channels {
        let wc = weight + c * count
        for oy in rows {
            let row = planes + c * phases.channelStride + (oy - rows.lowerBound) * phases.width, out = c * ho * wo + oy * wo
            func run<R: TileRow>(_: R.Type, at ox: Int) {
                var acc = R()
                for t in 0..<count { acc.add(wc[t], times: R(loading: row + taps[t] + ox)) }
                acc.adding(epilogue.bias[c]).store(at: out + ox, into: y)
            }
            let ox = columnRuns(wo, { run(Row48.self, at: $0) }, { run(Row16.self, at: $0) })
            epilogue.finish(rows: 0..<1, sums: y + out, ld: 0, ldc: 0, column: out, width: ox, in: y)
            guard ox < wo else { continue }
            // The last < 16 columns: the 16 ending at Wo, the same math as the runs (lanes before
            // `ox` recomputed and dropped); on a row narrower than 16, lanes gathered one by one.
            let first = max(0, wo - 16), lanes = wo - first
            var sum = Vec16()
            for t in 0..<count {
                var v = Vec16()
                if lanes == 16 {
                    v = row.vec16(taps[t] + first)
                } else {
                    for i in 0..<lanes { v[i] = row[taps[t] + first + i] }
                }
                sum = sum.addingProduct(Vec16(repeating: wc[t]), v)
            }
            let result = epilogue.apply(sum, row: c)
            if lanes == 16 {
                // Lanes before `ox` again, the same values: one store, not one a float.
                y.store(result + (epilogue.residual?.vec16(out + first) ?? Vec16()), at: out + first)
                continue
            }
            for i in (ox - first)..<lanes {
                y[out + first + i] = result[i] + (epilogue.residual?[out + first + i] ?? 0)
            }
        }
    }
}

/// Stride-1 depthwise convolutions (groups == Cin == Cout) straight from x [C, H, W]: a part is a
/// range of channels. Each input row is copied once, zero-padded, into its thread's ring of kH + 1
/// rows of `pitch` floats (in L1), and each output row sums its kH · kW taps from the ring a
/// vector at a time, bias added before its one store; the activation and residual then go over
/// the channel's plane while it is in cache (applied to the four sums in flight of the row loop,
/// SiLU's temporaries spilled them: 12–16 % slower).
struct DepthwiseRows: ParallelWork {
    let x: Address<Float>, y: Address<Float>, residual: Address<Float>?, weight: Address<Float>, bias: Address<Float>
    /// kH + 1 rows of `pitch` floats a thread.
    let ring: Address<Float>, pitch: Int
    let parts: Partition
    let p: Conv2DParameters
    let activation: Activation
    let h: Int, w: Int, ho: Int, wo: Int

    /// Floats of a ring row: the widest vector's reach past the last output column, whole vectors.
    static func pitch(wo: Int, kernelW: Int) -> Int { (max(wo, 16) + kernelW - 1 + 15) / 16 * 16 }

    func run(part: Int, thread t: Int) {
        let ring = self.ring.pointer + t * (p.kernelH + 1) * pitch
        if wideVectors {
            run(Vec16.self, channels: parts[part], ring: ring)
        } else {
            run(Vec8.self, channels: parts[part], ring: ring)
        }
    }

    @inline(__always)
    private func run<V: FloatVector>(_: V.Type, channels: Range<Int>, ring: UnsafeMutablePointer<Float>) {
        let (kh, kw) = (p.kernelH, p.kernelW)
        let n = V.scalarCount, (padH, padW) = (p.padH, p.padW), three = kh == 3 && kw == 3, five = kh == 5 && kw == 5
        // The padding columns are never written after this.
        let slots = kh + 1
        ring.initialize(repeating: 0, count: slots * pitch)
        for c in channels {
            let xc = x.pointer + c * h * w, wc = weight.pointer + c * kh * kw, yc = y.pointer + c * ho * wo
            let b = bias.pointer[c]
            /// Input row iy into slot `index`, from column padW: zeros for a padding row.
            func load(_ iy: Int, into index: Int) {
                let slot = ring + index * pitch + padW
                guard iy >= 0 && iy < h else { return slot.initialize(repeating: 0, count: w) }
                let row = xc + iy * w
                var i = 0
                while i + n <= w {
                    slot.store(row.vector(i) as V, at: i)
                    i &+= n
                }
                for j in i..<w { slot[j] = row[j] }
            }
            for ky in 0..<kh { load(ky - padH, into: ky) }
            // Input rows oy − padH + ky are in slots (oy + ky) % (kH + 1): `first` is oy's, kept
            // by wrapping, not by a division (a few a row, by a number known only at run time).
            var first = 0
            let base = UnsafePointer(ring)
            @inline(__always) func slot(_ ky: Int) -> Int { first &+ ky < slots ? first &+ ky : first &+ ky &- slots }
            for oy in 0..<ho {
                // The next output row's last input row, an output row ahead: copied right before
                // its first use, it would be read back through stores that have not reached L1.
                if oy + 1 < ho { load(oy + kh - padH, into: slot(kh)) }
                let out = yc + oy * wo
                let s0 = base + slot(0) &* pitch, s1 = base + slot(1) &* pitch, s2 = base + slot(2) &* pitch
                defer { first = slot(1) }
                /// Output columns ox ..< ox + n, finished: each kernel row's taps summed on their own
                /// (one chain of kH · kW dependent multiply-adds a vector was latency-bound), 3×3
                /// and 5×5 (GhostConv's) written out (the loops were not unrolled).
                @inline(__always) func sum(_ ox: Int) -> V {
                    if five {
                        @inline(__always) func row(_ ky: Int) -> V {
                            let r: UnsafePointer<Float> = base + (slot(ky) &* pitch &+ ox), t = ky &* 5
                            var s = V(repeating: wc[t]) * r.vector(0)
                            s = s.addingProduct(V(repeating: wc[t &+ 1]), r.vector(1))
                            s = s.addingProduct(V(repeating: wc[t &+ 2]), r.vector(2))
                            s = s.addingProduct(V(repeating: wc[t &+ 3]), r.vector(3))
                            return s.addingProduct(V(repeating: wc[t &+ 4]), r.vector(4))
                        }
                        return row(0) + row(1) + row(2) + row(3) + row(4) + b
                    }
                    if three {
                        let (p0, p1, p2) = (s0 + ox, s1 + ox, s2 + ox)
                        var a = V(repeating: wc[0]) * p0.vector(0)
                        var b1 = V(repeating: wc[3]) * p1.vector(0)
                        var c = V(repeating: wc[6]) * p2.vector(0)
                        a = a.addingProduct(V(repeating: wc[1]), p0.vector(1))
                        b1 = b1.addingProduct(V(repeating: wc[4]), p1.vector(1))
                        c = c.addingProduct(V(repeating: wc[7]), p2.vector(1))
                        a = a.addingProduct(V(repeating: wc[2]), p0.vector(2))
                        b1 = b1.addingProduct(V(repeating: wc[5]), p1.vector(2))
                        c = c.addingProduct(V(repeating: wc[8]), p2.vector(2))
                        return a + b1 + c + b
                    }
                    var total = V()
                    for ky in 0..<kh {
                        let r: UnsafePointer<Float> = base + (slot(ky) &* pitch &+ ox)
                        let t = ky &* kw
                        var s = V(repeating: wc[t]) * r.vector(0)
                        for kx in 1..<kw { s = s.addingProduct(V(repeating: wc[t &+ kx]), r.vector(kx)) }
                        total += s
                    }
                    return total + b
                }
                @inline(__always) func put(_ v: V, _ ox: Int) { out.store(v, at: ox) }
                // Four vectors at a time (independent chains), the last ones with the n ending at
                // Wo (lanes already stored rewritten with the same values) side by side too: one
                // by one, each a long chain of dependent operations, they were latency-bound on
                // the rows of 20 and 40; a row narrower than a vector lane by lane.
                var ox = 0
                while ox &+ 4 &* n <= wo {
                    let (v0, v1, v2, v3) = (sum(ox), sum(ox &+ n), sum(ox &+ 2 &* n), sum(ox &+ 3 &* n))
                    put(v0, ox); put(v1, ox &+ n); put(v2, ox &+ 2 &* n); put(v3, ox &+ 3 &* n)
                    ox &+= 4 &* n
                }
                guard ox < wo else { continue }
                if wo >= n {
                    // At most three whole vectors and the one ending at Wo are left.
                    let last = wo &- n
                    let (p1, p2) = (min(ox &+ n, last), min(ox &+ 2 &* n, last))
                    if p2 < last {
                        let (v0, v1, v2, v3) = (sum(ox), sum(p1), sum(p2), sum(last))
                        put(v0, ox); put(v1, p1); put(v2, p2); put(v3, last)
                    } else if p1 < last {
                        let (v0, v1, v2) = (sum(ox), sum(p1), sum(last))
                        put(v0, ox); put(v1, p1); put(v2, last)
                    } else if ox < last {
                        let (v0, v1) = (sum(ox), sum(last))
                        put(v0, ox); put(v1, last)
                    } else {
                        put(sum(last), last)
                    }
                } else {
                    let v = sum(0)
                    for i in 0..<wo { out[i] = v[i] }
                }
            }
            applyActivation(activation, yc, yc, count: ho * wo)
            if let residual { addVectors(yc, residual.pointer + c * ho * wo, into: yc, count: ho * wo) }
        }
    }
}

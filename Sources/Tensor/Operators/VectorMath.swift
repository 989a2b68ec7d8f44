import CTargetFeatures
/// SIMD building blocks shared by the kernels: 16- and 8-lane loads and stores on raw
/// pointers, and exp / sigmoid / SiLU accurate to a few ULP (`exp`'s coarse form excepted) at any
/// vector width (the same operations per lane, so the same result whichever width computes it).
public typealias Vec16 = SIMD16<Float>
public typealias Vec8 = SIMD8<Float>

/// Whether this build targets AVX-512 (`TARGET_VECTOR_BITS`, CTargetFeatures): kernels then
/// compute in 16 lanes. A constant the optimizer folds into every branch on it; tested in place,
/// the macro made the compiler warn of each branch not taken.
let wideVectors = TARGET_VECTOR_BITS >= 512

/// A vector the kernels compute in (`Vec16`, `Vec8`). Lane comparisons are requirements, written
/// for each type: from a generic SIMD context they compile lane by lane, with branches.
public protocol FloatVector: SIMD, Sendable where Scalar == Float {
    /// Each lane clamped to [lo, hi] by compare-and-blend (the standard library's `clamped`
    /// checks its bounds lane by lane).
    func clamped(_ lo: Float, _ hi: Float) -> Self
    /// The larger of self and `other` per lane, as one `vmaxps` (the standard library's
    /// `pointwiseMax` runs lane by lane, to order NaNs and signed zeros). A NaN in `other` gives
    /// self's lane.
    func maximum(_ other: Self) -> Self
}

extension SIMD16: FloatVector where Scalar == Float {
    @inlinable @inline(__always)
    public func clamped(_ lo: Float, _ hi: Float) -> Self {
        var x = self
        x.replace(with: lo, where: x .< lo)
        x.replace(with: hi, where: x .> hi)
        return x
    }

    @inlinable @inline(__always)
    public func maximum(_ other: Self) -> Self { replacing(with: other, where: other .> self) }
}

extension SIMD8: FloatVector where Scalar == Float {
    @inlinable @inline(__always)
    public func clamped(_ lo: Float, _ hi: Float) -> Self {
        var x = self
        x.replace(with: lo, where: x .< lo)
        x.replace(with: hi, where: x .> hi)
        return x
    }

    @inlinable @inline(__always)
    public func maximum(_ other: Self) -> Self { replacing(with: other, where: other .> self) }
}

extension UnsafePointer where Pointee == Float {
    @inlinable @inline(__always)
    func vec16(_ i: Int) -> Vec16 { UnsafeRawPointer(self + i).loadUnaligned(as: Vec16.self) }

    @inlinable @inline(__always)
    func vector<V: FloatVector>(_ i: Int) -> V { UnsafeRawPointer(self + i).loadUnaligned(as: V.self) }
}

extension UnsafeMutablePointer where Pointee == Float {
    @inlinable @inline(__always)
    func vec16(_ i: Int) -> Vec16 { UnsafeRawPointer(self + i).loadUnaligned(as: Vec16.self) }

    @inlinable @inline(__always)
    func vector<V: FloatVector>(_ i: Int) -> V { UnsafeRawPointer(self + i).loadUnaligned(as: V.self) }

    @inlinable @inline(__always)
    func store<V: FloatVector>(_ v: V, at i: Int) {
        UnsafeMutableRawPointer(self + i).storeBytes(of: v, as: V.self)
    }
}

/// exp(x) per lane: x = n·ln2 + r with |r| ≤ ln2/2, exp(r) ≈ 1 + r + r²·q(r) with q of degree 4
/// (a degree-6 fit, relative error below 1e-8 on that range), and 2ⁿ built in the exponent bits.
/// Inputs are clamped to [-87, 88] so 2ⁿ stays a normal float; exp(-87) ≈ 1.6e-38 stands in for
/// anything smaller. Within 1.4 ULP for |x| ≤ 20 and 4.5 at ±87, where ln2 held in one float (r
/// in one step) costs the most. The chain of dependent operations is short (one reduction step,
/// q by Estrin's scheme) because SiLU was bound by its latency more than by its operation count:
/// it is faster than the degree-7 Cephes polynomial by Horner's rule after two reduction steps,
/// with the same error on [-20, 20] (see docs/PERFORMANCE.md).
@inlinable @inline(__always)
public func exp<V: FloatVector>(_ v: V) -> V { exp(v, coarse: false) }

/// `exp`, or with `coarse` q of degree 1 (c₂ + c₃·r, the minimax fit of relative error 1.23e-4),
/// its dependent chain two operations shorter (four fewer in all), for callers whose inputs
/// carry larger errors already. `negated`: exp(−v), the same bits as exp of −v without the
/// negation (SiLU's and sigmoid's): the clamp, log2(e) and q's odd coefficients change sign, and
/// ρ = −r comes out of the same single rounding as r would.
@inlinable @inline(__always)
package func exp<V: FloatVector>(_ v: V, coarse: Bool, negated: Bool = false) -> V {
    let sign: Float = negated ? -1 : 1
    let x = negated ? v.clamped(-88, 87) : v.clamped(-87, 88)
    // Adding 1.5·2²³ rounds x·log2(e) to the nearest integer (ties to even) and leaves it in the
    // low mantissa bits: n and 2ⁿ come out without a float→int conversion, which Swift's
    // generic SIMD conversion would do one lane at a time.
    // Fused multiply-adds throughout (`addingProduct`; Swift does not contract a * b + c).
    let magic = V(repeating: 12_582_912)
    let t = magic.addingProduct(x, V(repeating: sign * 1.44269504088896341))
    let n = t - magic
    // ρ = sign · r, r = sign · x − n·ln2.
    let rho = x.addingProduct(n, V(repeating: -sign * 0.693147182464599609375))
    let r2 = rho * rho
    let q: V
    if coarse {
        q = V(repeating: 0.50394106).addingProduct(rho, V(repeating: sign * 0.16662817))
    } else {
        let a = V(repeating: 0.49999967217445374).addingProduct(rho, V(repeating: sign * 0.16666479408740997))
        let b = V(repeating: 0.04167356714606285).addingProduct(rho, V(repeating: sign * 0.008372689597308636))
        q = a.addingProduct(r2, b).addingProduct(r2 * r2, V(repeating: 0.001357120694592595))
    }
    let p = (negated ? 1 - rho : rho + 1).addingProduct(q, r2)
    // p · 2ⁿ by adding n to p's exponent bits: t's low bits hold n (two's complement), so t << 23
    // is n << 23. p ∈ [0.7, 1.42] and n ∈ [-126, 127] keep the sum a normal float, so this is the
    // product bit for bit, without a multiply on the FMA ports exp is bound by.
    return unsafeBitCast(unsafeBitCast(p, to: V.MaskStorage.self) &+ (unsafeBitCast(t, to: V.MaskStorage.self) &<< 23),
                         to: V.self)
}

/// 1 / (1 + e⁻ˣ) per lane.
@inlinable @inline(__always)
public func sigmoid<V: FloatVector>(_ x: V) -> V { 1 / (1 + exp(x, coarse: false, negated: true)) }

/// x · sigmoid(x) per lane (SiLU, the activation of every YOLO Conv).
@inlinable @inline(__always)
public func silu<V: FloatVector>(_ x: V) -> V { x / (1 + exp(x, coarse: false, negated: true)) }

/// max(x, 0) per lane (YOLOv6's activation).
@inlinable @inline(__always)
public func relu<V: FloatVector>(_ x: V) -> V { x.maximum(.zero) }

/// x for x ≥ 0, else 0.1 · x, per lane: the larger of the two.
@inlinable @inline(__always)
public func leakyReLU<V: FloatVector>(_ x: V) -> V { x.maximum(x * 0.1) }

/// Applies `f` to `count` floats from `src` into `dst` (which may alias `src`), a vector of `V` at
/// a time. The tail goes through the same vector function on a padded vector, so every element
/// gets bit-identical math wherever it falls. Callers pick the target's width (`wideVectors`):
/// on AVX2, 16-lane exp compiled to four 128-bit quarters in a function of its own, called per vector.
@inline(__always)
func mapVectors<V: FloatVector>(_ src: UnsafePointer<Float>, _ dst: UnsafeMutablePointer<Float>, _ count: Int,
                                _ f: (V) -> V) {
    var i = 0
    while i + V.scalarCount <= count {
        dst.store(f(src.vector(i)), at: i)
        i += V.scalarCount
    }
    if i < count {
        var v = V()
        for j in 0..<(count - i) { v[j] = src[i + j] }
        let r = f(v)
        for j in 0..<(count - i) { dst[i + j] = r[j] }
    }
}

/// y[i] = a[i] + b[i] for i < count; `y` may alias `a` or `b`.
@inlinable
package func addVectors(_ a: UnsafePointer<Float>, _ b: UnsafePointer<Float>, into y: UnsafeMutablePointer<Float>, count: Int) {
    var i = 0
    while i + 16 <= count {
        y.store(a.vec16(i) + b.vec16(i), at: i)
        i += 16
    }
    while i < count {
        y[i] = a[i] + b[i]
        i += 1
    }
}

#include <immintrin.h>

// The vector width the compiler targets (`-Xswiftc -target-cpu …`), read by Swift through the
// Clang importer, which sees the same target: Swift itself has no compile-time test of CPU
// features, and the GEMM's register tile must fit the registers the build has.
#if defined(__AVX512F__)
#define TARGET_VECTOR_BITS 512
#elif defined(__AVX__)
#define TARGET_VECTOR_BITS 256
#else
#define TARGET_VECTOR_BITS 128
#endif

// Asks for the cache line holding `p` to be brought into L2 (prefetcht1): Swift has no
// prefetch, and the Clang importer inlines this.
static inline void prefetchL2(const void *p) { __builtin_prefetch(p, 0, 2); }

// Asks for the cache line holding `p` to be brought into L1 (prefetcht0).
static inline void prefetchL1(const void *p) { __builtin_prefetch(p, 0, 3); }

// Asks for the cache line holding `p` to be brought into L1 for writing (prefetchw where the
// target has it, else prefetcht0).
static inline void prefetchWrite(const void *p) { __builtin_prefetch(p, 1, 3); }

// The int8 kernels' vector steps, each an intrinsic where the build targets AVX2 (AVX for the float
// ones) and plain vector code on baseline x86-64, whose Swift cannot call `_mm256_*` (Swift has no
// compile-time test of CPU features, so the choice is made here). Both give the same values.
typedef int Int32Lanes8 __attribute__((vector_size(32)));
typedef unsigned char UInt8Lanes32 __attribute__((vector_size(32)));
typedef signed char Int8Lanes32 __attribute__((vector_size(32)));

// acc + the sums of the four products of a's unsigned bytes with w's signed ones in each 32-bit
// lane: `vpdpbusd` where the build targets VNNI (AVX-512 or AVX), else `vpmaddubsw` (pairs into
// saturating Int16s), `vpmaddwd` by ones and `vpaddd`. The two agree while no pair exceeds Int16:
// with weights |w| ≤ 63, as the int8 GEMM's are. Swift's intrinsics module hides VNNI from builds
// without it.
static inline __m256i dotAccumulate(__m256i acc, __m256i a, __m256i w) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(acc, a, w);
#elif defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, a, w);
#elif defined(__AVX2__)
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(a, w), _mm256_set1_epi16(1)));
#else
    Int32Lanes8 sum = (Int32Lanes8)acc;
    UInt8Lanes32 x = (UInt8Lanes32)a;
    Int8Lanes32 y = (Int8Lanes32)w;
    for (int i = 0; i < 32; i++) sum[i / 4] += x[i] * y[i];
    return (__m256i)sum;
#endif
}

// x in all 8 Int32 lanes.
static inline __m256i broadcastInt32(int x) {
#if defined(__AVX__)
    return _mm256_set1_epi32(x);
#else
    return (__m256i)((Int32Lanes8){0} + x);
#endif
}

// (sums − offset) as floats, lane by lane.
static inline __m256 offsetSumsToFloat(__m256i sums, int offset) {
#if defined(__AVX2__)
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(sums, _mm256_set1_epi32(offset)));
#else
    return __builtin_convertvector((Int32Lanes8)sums - offset, __m256);
#endif
}

// ≈ 1 / d: `vrcpps` (relative error ≤ 1.5·2⁻¹²) on AVX, exact on baseline x86-64.
static inline __m256 reciprocalEstimate(__m256 d) {
#if defined(__AVX__)
    return _mm256_rcp_ps(d);
#else
    return 1.0f / d;
#endif
}

// a < b ? a : b and a > b ? a : b lane by lane (b where either is NaN), as `vminps`/`vmaxps`.
static inline __m256 lanesMin(__m256 a, __m256 b) {
#if defined(__AVX__)
    return _mm256_min_ps(a, b);
#else
    Int32Lanes8 less = a < b;
    return (__m256)((less & (Int32Lanes8)a) | (~less & (Int32Lanes8)b));
#endif
}

static inline __m256 lanesMax(__m256 a, __m256 b) {
#if defined(__AVX__)
    return _mm256_max_ps(a, b);
#else
    Int32Lanes8 greater = a > b;
    return (__m256)((greater & (Int32Lanes8)a) | (~greater & (Int32Lanes8)b));
#endif
}

// The first n (0 … 8) floats at p, zeros after: lanes past n are not read.
static inline __m256 loadFirst(const float *p, int n) {
#if defined(__AVX2__)
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
#else
    __m256 v = {0};
    for (int i = 0; i < n; i++) v[i] = p[i];
    return v;
#endif
}

// 8 pixels of 4 channels as bytes, channel c's in bits 8c … 8c + 7 of each pixel's 32-bit lane:
// c·inverse rounded to nearest even (`vcvtps2dq`: NaN and out-of-range give INT32_MIN), saturated
// to Int16, + zero saturating, clamped to 0 … 255. 128-bit lanes pack separately, so each holds 4
// pixels' bytes channel-major, which one shuffle turns pixel-major.
static inline __m256i quantizePixels(__m256 c0, __m256 c1, __m256 c2, __m256 c3, float inverse, short zero) {
#if defined(__AVX2__)
    __m256i z = _mm256_set1_epi16(zero);
    __m256i low = _mm256_adds_epi16(_mm256_packs_epi32(_mm256_cvtps_epi32(c0 * inverse), _mm256_cvtps_epi32(c1 * inverse)), z);
    __m256i high = _mm256_adds_epi16(_mm256_packs_epi32(_mm256_cvtps_epi32(c2 * inverse), _mm256_cvtps_epi32(c3 * inverse)), z);
    __m256i order = _mm256_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15,
                                     0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm256_shuffle_epi8(_mm256_packus_epi16(low, high), order);
#else
    __m256 channels[4] = {c0 * inverse, c1 * inverse, c2 * inverse, c3 * inverse};
    UInt8Lanes32 bytes;
    for (int c = 0; c < 4; c++) {
        for (int i = 0; i < 8; i++) {
            float x = channels[c][i];
            long r = x == x && x >= -2147483648.0f && x < 2147483648.0f ? __builtin_lrintf(x) : -2147483647L - 1;
            r = r < -32768 ? -32768 : r > 32767 ? 32767 : r;
            r = r + zero < -32768 ? -32768 : r + zero > 32767 ? 32767 : r + zero;
            bytes[4 * i + c] = r < 0 ? 0 : r > 255 ? 255 : (unsigned char)r;
        }
    }
    return (__m256i)bytes;
#endif
}

// 16 floats: one AVX-512 register, imported into Swift as SIMD16<Float>.
typedef float Float16Lanes __attribute__((ext_vector_type(16)));

// [0, v₀, v₁, …, v₁₄]: the lanes one up, a zero in the first (one instruction on AVX-512, a
// masked `vexpandps` here). Swift's SIMD types have no constant shuffle: their index subscript
// is a call.
static inline Float16Lanes lanesShiftedUp(Float16Lanes v) {
    Float16Lanes zero = 0;
    return __builtin_shufflevector(zero, v, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
}

// The x86 features beyond baseline x86-64 a build may use, one bit each: the compiler may emit
// any instruction of the ones it targets (`-target-cpu`, seen here through the same macros), and
// a CPU without one dies on an illegal instruction. Names as `__builtin_cpu_supports` spells them.
#define TARGET_FEATURE_LIST(F) \
    F(SSE3, "sse3") \
    F(SSSE3, "ssse3") \
    F(SSE4_1, "sse4.1") \
    F(SSE4_2, "sse4.2") \
    F(POPCNT, "popcnt") \
    F(AES, "aes") \
    F(PCLMUL, "pclmul") \
    F(AVX, "avx") \
    F(AVX2, "avx2") \
    F(FMA, "fma") \
    F(F16C, "f16c") \
    F(BMI, "bmi") \
    F(BMI2, "bmi2") \
    F(LZCNT, "lzcnt") \
    F(MOVBE, "movbe") \
    F(ADX, "adx") \
    F(SHA, "sha") \
    F(GFNI, "gfni") \
    F(VAES, "vaes") \
    F(VPCLMULQDQ, "vpclmulqdq") \
    F(AVXVNNI, "avxvnni") \
    F(AVX512F, "avx512f") \
    F(AVX512CD, "avx512cd") \
    F(AVX512BW, "avx512bw") \
    F(AVX512DQ, "avx512dq") \
    F(AVX512VL, "avx512vl") \
    F(AVX512IFMA, "avx512ifma") \
    F(AVX512VBMI, "avx512vbmi") \
    F(AVX512VBMI2, "avx512vbmi2") \
    F(AVX512VNNI, "avx512vnni") \
    F(AVX512BITALG, "avx512bitalg") \
    F(AVX512VPOPCNTDQ, "avx512vpopcntdq") \
    F(AVX512BF16, "avx512bf16") \
    F(AVX512FP16, "avx512fp16")

#define TARGET_FEATURE_INDEX(id, name) TARGET_FEATURE_INDEX_##id,
enum { TARGET_FEATURE_LIST(TARGET_FEATURE_INDEX) TARGET_FEATURE_COUNT };
#undef TARGET_FEATURE_INDEX
#define TARGET_FEATURE_BIT(id, name) TARGET_FEATURE_##id = 1ull << TARGET_FEATURE_INDEX_##id,
enum : unsigned long long { TARGET_FEATURE_LIST(TARGET_FEATURE_BIT) };
#undef TARGET_FEATURE_BIT

// The features this build targets.
static inline unsigned long long targetedFeatures(void) {
    return 0
#ifdef __SSE3__
        | TARGET_FEATURE_SSE3
#endif
#ifdef __SSSE3__
        | TARGET_FEATURE_SSSE3
#endif
#ifdef __SSE4_1__
        | TARGET_FEATURE_SSE4_1
#endif
#ifdef __SSE4_2__
        | TARGET_FEATURE_SSE4_2
#endif
#ifdef __POPCNT__
        | TARGET_FEATURE_POPCNT
#endif
#ifdef __AES__
        | TARGET_FEATURE_AES
#endif
#ifdef __PCLMUL__
        | TARGET_FEATURE_PCLMUL
#endif
#ifdef __AVX__
        | TARGET_FEATURE_AVX
#endif
#ifdef __AVX2__
        | TARGET_FEATURE_AVX2
#endif
#ifdef __FMA__
        | TARGET_FEATURE_FMA
#endif
#ifdef __F16C__
        | TARGET_FEATURE_F16C
#endif
#ifdef __BMI__
        | TARGET_FEATURE_BMI
#endif
#ifdef __BMI2__
        | TARGET_FEATURE_BMI2
#endif
#ifdef __LZCNT__
        | TARGET_FEATURE_LZCNT
#endif
#ifdef __MOVBE__
        | TARGET_FEATURE_MOVBE
#endif
#ifdef __ADX__
        | TARGET_FEATURE_ADX
#endif
#ifdef __SHA__
        | TARGET_FEATURE_SHA
#endif
#ifdef __GFNI__
        | TARGET_FEATURE_GFNI
#endif
#ifdef __VAES__
        | TARGET_FEATURE_VAES
#endif
#ifdef __VPCLMULQDQ__
        | TARGET_FEATURE_VPCLMULQDQ
#endif
#ifdef __AVXVNNI__
        | TARGET_FEATURE_AVXVNNI
#endif
#ifdef __AVX512F__
        | TARGET_FEATURE_AVX512F
#endif
#ifdef __AVX512CD__
        | TARGET_FEATURE_AVX512CD
#endif
#ifdef __AVX512BW__
        | TARGET_FEATURE_AVX512BW
#endif
#ifdef __AVX512DQ__
        | TARGET_FEATURE_AVX512DQ
#endif
#ifdef __AVX512VL__
        | TARGET_FEATURE_AVX512VL
#endif
#ifdef __AVX512IFMA__
        | TARGET_FEATURE_AVX512IFMA
#endif
#ifdef __AVX512VBMI__
        | TARGET_FEATURE_AVX512VBMI
#endif
#ifdef __AVX512VBMI2__
        | TARGET_FEATURE_AVX512VBMI2
#endif
#ifdef __AVX512VNNI__
        | TARGET_FEATURE_AVX512VNNI
#endif
#ifdef __AVX512BITALG__
        | TARGET_FEATURE_AVX512BITALG
#endif
#ifdef __AVX512VPOPCNTDQ__
        | TARGET_FEATURE_AVX512VPOPCNTDQ
#endif
#ifdef __AVX512BF16__
        | TARGET_FEATURE_AVX512BF16
#endif
#ifdef __AVX512FP16__
        | TARGET_FEATURE_AVX512FP16
#endif
        ;
}

// The features the running CPU (and its operating system) supports. It must run on any x86-64
// CPU whatever the build targets: never inlined, without AVX, and one bit at a time through a
// volatile, so that the compiler vectorizes nothing.
__attribute__((noinline, target("no-avx")))
static inline unsigned long long presentFeatures(void) {
    __builtin_cpu_init();
    volatile unsigned long long bits = 0;
#define TARGET_FEATURE_PRESENT(id, name) if (__builtin_cpu_supports(name)) bits |= TARGET_FEATURE_##id;
    TARGET_FEATURE_LIST(TARGET_FEATURE_PRESENT)
#undef TARGET_FEATURE_PRESENT
    return bits;
}

// The name of feature `index` (bit 1 << index), NULL past the last.
static inline const char *targetFeatureName(int index) {
    switch (index) {
#define TARGET_FEATURE_NAME(id, name) case TARGET_FEATURE_INDEX_##id: return name;
    TARGET_FEATURE_LIST(TARGET_FEATURE_NAME)
#undef TARGET_FEATURE_NAME
    default: return 0;
    }
}

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

// 16 floats: one AVX-512 register, imported into Swift as SIMD16<Float>.
typedef float Float16Lanes __attribute__((ext_vector_type(16)));

// [0, v₀, v₁, …, v₁₄]: the lanes one up, a zero in the first (one instruction on AVX-512, a
// masked `vexpandps` here). Swift's SIMD types have no constant shuffle: their index subscript
// is a call.
static inline Float16Lanes lanesShiftedUp(Float16Lanes v) {
    Float16Lanes zero = 0;
    return __builtin_shufflevector(zero, v, 0, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30);
}

// The test executable's own malloc family: the dynamic linker binds every library's calls
// (the Swift runtime's, Foundation's, ours) to these definitions, which count and forward to
// glibc's allocator through its exported __libc_* entry points.
#include "AllocationCounter.h"
#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

// A sanitizer brings its own allocator: defining malloc here would bypass it.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define SANITIZED 1
#endif
#endif

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static atomic_int counting;
static atomic_uint_fast64_t allocations;

static inline void count(void) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        atomic_fetch_add_explicit(&allocations, 1, memory_order_relaxed);
    }
}

void allocation_counter_start(void) {
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
}

uint64_t allocation_counter_stop(void) {
    atomic_store(&counting, 0);
    return atomic_load(&allocations);
}

#ifdef SANITIZED
int allocation_counter_available(void) { return 0; }
#else
int allocation_counter_available(void) { return 1; }

void *malloc(size_t size) { count(); return __libc_malloc(size); }
void *calloc(size_t n, size_t size) { count(); return __libc_calloc(n, size); }
void *realloc(void *p, size_t size) { count(); return __libc_realloc(p, size); }
void free(void *p) { __libc_free(p); }
void *memalign(size_t alignment, size_t size) { count(); return __libc_memalign(alignment, size); }
void *aligned_alloc(size_t alignment, size_t size) { count(); return __libc_memalign(alignment, size); }

int posix_memalign(void **out, size_t alignment, size_t size) {
    count();
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    void *p = __libc_memalign(alignment, size);
    if (p == NULL) return ENOMEM;
    *out = p;
    return 0;
}
#endif

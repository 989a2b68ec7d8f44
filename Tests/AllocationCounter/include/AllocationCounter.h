#include <stdint.h>

/// Starts counting heap allocations (malloc, calloc, realloc and the aligned forms) made by
/// any thread of this process.
void allocation_counter_start(void);
/// Stops counting; returns the allocations since `allocation_counter_start`.
uint64_t allocation_counter_stop(void);
/// 0 in a sanitizer build, where the sanitizer's allocator is not replaced and nothing is counted.
int allocation_counter_available(void);

// glibc's allocator tuning (malloc.h is not part of Swift's Glibc module).
#ifndef STOCKROOM_CMALLOC_SHIM_H
#define STOCKROOM_CMALLOC_SHIM_H

#if defined(__GLIBC__) || defined(__linux__)
#include <malloc.h>

/// Fixes the size from which allocations are mmapped, which also stops glibc from raising it.
static inline int stockroom_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
#else
static inline int stockroom_set_mmap_threshold(int bytes) { (void)bytes; return 1; }
#endif

#endif

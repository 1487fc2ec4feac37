// glibc's allocator tuning (malloc.h is not part of Swift's Glibc module), and readahead(2).
#ifndef STOCKROOM_CMALLOC_SHIM_H
#define STOCKROOM_CMALLOC_SHIM_H

#if defined(__GLIBC__) || defined(__linux__)
#ifndef _GNU_SOURCE
#define _GNU_SOURCE  // readahead(2)
#endif
#include <malloc.h>
#include <fcntl.h>

/// Reads a file's range into the page cache, blocking until it is there (Swift's Glibc module
/// does not export readahead(2)).
static inline long stockroom_readahead(int descriptor, long long offset, unsigned long count) {
    return (long)readahead(descriptor, (off_t)offset, (size_t)count);
}

/// Fixes the size from which allocations are mmapped, which also stops glibc from raising it.
static inline int stockroom_set_mmap_threshold(int bytes) {
    return mallopt(M_MMAP_THRESHOLD, bytes);
}
#else
static inline int stockroom_set_mmap_threshold(int bytes) { (void)bytes; return 1; }
static inline long stockroom_readahead(int descriptor, long long offset, unsigned long count) {
    (void)descriptor; (void)offset; (void)count;
    return 0;
}
#endif

#endif

import CMalloc

/// Process-wide allocator settings that keep streaming memory bounded.
public enum StreamingMemory {
    /// Fixes glibc's mmap threshold at 128 KiB, so a chunk buffer (512 KiB) that has to be
    /// allocated is mapped and unmapped, never parked in an arena.
    ///
    /// Downloads reuse their two chunk buffers (`LocalContentStore`), so this matters only when
    /// the channel still holds one and copy-on-write allocates. Such buffers are freed on another
    /// thread than the one that allocated them; by default glibc then raises its mmap threshold
    /// and keeps them in per-thread arenas that never shrink (measured: 16 clients streaming
    /// 1 GiB each with a fresh buffer per chunk peaked at 1 GB RSS). Call once at start-up.
    public static func bound() {
        _ = stockroom_set_mmap_threshold(128 * 1024)
    }
}

/// The page cache, warmed ahead of `sendfile`.
public enum PageCache {
    /// Reads `count` bytes of `descriptor`'s file at `offset` into the page cache, blocking until
    /// they are there: call it on a thread pool, so that `sendfile` on an event loop finds them.
    public static func readAhead(_ descriptor: Int32, offset: Int64, count: Int) {
        _ = stockroom_readahead(descriptor, offset, UInt(count))
    }
}

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The process's open-file limit (`RLIMIT_NOFILE`), raised at start from the soft limit to the
/// hard one: a server must not run out of descriptors at systemd's soft 1024 while the hard limit
/// allows far more. Connections are then capped below it (`--max-connections`), leaving room for
/// content files, the ledger, upstream calls and the runtime's own (libdispatch aborts the
/// process when it cannot open `/proc/<tid>/stat`).
public struct DescriptorLimit: Sendable, Equatable {
    /// The soft limit found at start.
    public let before: Int
    /// The soft limit now in force.
    public let soft: Int
    /// The hard limit, which only root may raise.
    public let hard: Int

    /// Linux refuses a limit above `fs.nr_open` (1048576 by default); an unlimited hard limit is
    /// raised to this at most.
    static let ceiling = 1 << 20

    /// Raises the soft limit to the hard one (at most `ceiling`) and says what it found and set.
    public static func raise() -> DescriptorLimit {
        var limits = rlimit()
        guard getrlimit(resource, &limits) == 0 else { return DescriptorLimit(before: 1024, soft: 1024, hard: 1024) }
        let before = clamp(limits.rlim_cur)
        let hard = clamp(limits.rlim_max)
        guard before < hard else { return DescriptorLimit(before: before, soft: before, hard: hard) }
        var raised = limits
        raised.rlim_cur = rlim_t(hard)
        let soft = setrlimit(resource, &raised) == 0 ? hard : before
        return DescriptorLimit(before: before, soft: soft, hard: hard)
    }

    /// The connection cap that leaves this limit room for everything else: half of what remains
    /// after a reserve, since a streaming connection also holds its content file open.
    public var defaultMaxConnections: Int {
        let reserve = min(256, max(64, soft / 8))
        return max(16, (soft - reserve) / 2)
    }

    #if canImport(Glibc)
        private static let resource = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
    #else
        private static let resource = RLIMIT_NOFILE
    #endif

    private static func clamp(_ value: rlim_t) -> Int {
        value > rlim_t(ceiling) ? ceiling : Int(value)  // RLIM_INFINITY is the largest rlim_t
    }
}

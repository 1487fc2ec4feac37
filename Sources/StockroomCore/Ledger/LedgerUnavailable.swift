/// The ledger's database cannot be reached (a lost server, a full pool, a network cut): every
/// ledger call throws this instead of an engine's own error, so the edge answers 503
/// `ledger_unavailable` with `Retry-After` and the next call tries again.
///
/// It says nothing that could hold a secret: no address, no password, no query.
public struct LedgerUnavailable: Error, Sendable, Equatable, CustomStringConvertible {
    /// What went wrong, in a few words (`connection refused`, `no connection within 5 s`).
    public var reason: String
    /// When a retry is worth making.
    public var retryAfter: Duration

    public init(reason: String, retryAfter: Duration = .seconds(5)) {
        self.reason = reason
        self.retryAfter = retryAfter
    }

    public var description: String { "the ledger database is unavailable: \(reason)" }
}

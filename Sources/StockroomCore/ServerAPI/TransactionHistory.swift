/// One page of Get Transaction History v2, as the App Store Server API answered it.
///
/// Nothing in it is trusted: every signed transaction must be verified before use.
/// See https://developer.apple.com/documentation/appstoreserverapi/historyresponse
public struct TransactionHistoryPage: Sendable, Equatable {
    /// The customer's transactions on this page (JWS, unverified), oldest first.
    public var signedTransactions: [String]
    /// Whether another page follows; ask again with `revision`.
    public var hasMore: Bool
    /// The token for the next page.
    public var revision: String?
    public var bundleID: String?
    /// The environment that answered; later pages are asked of the same one.
    public var environment: StoreEnvironment

    public init(signedTransactions: [String], hasMore: Bool, revision: String?, bundleID: String?, environment: StoreEnvironment) {
        self.signedTransactions = signedTransactions
        self.hasMore = hasMore
        self.revision = revision
        self.bundleID = bundleID
        self.environment = environment
    }

    /// The most transactions a page may hold: Apple sends 20; more is read as a broken answer.
    public static let largestPage = 100
}

/// A customer's whole history: every page followed, within a bound.
public struct TransactionHistory: Sendable, Equatable {
    /// Every signed transaction of every page (unverified), in the order Apple sent them.
    public var signedTransactions: [String]
    public var environment: StoreEnvironment
    /// How many pages were read.
    public var pages: Int

    public init(signedTransactions: [String], environment: StoreEnvironment, pages: Int) {
        self.signedTransactions = signedTransactions
        self.environment = environment
        self.pages = pages
    }
}

/// Why a transaction history could not be had.
public enum TransactionHistoryFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// Neither environment knows the transaction (4040010), or the ID is no transaction ID.
    case notFound
    /// The App Store could not be asked, or answered unusably; retry after the duration.
    case unavailable(reason: String, retryAfter: Duration)

    public var description: String {
        switch self {
        case .notFound: "the App Store knows no such transaction"
        case .unavailable(let reason, _): reason
        }
    }
}

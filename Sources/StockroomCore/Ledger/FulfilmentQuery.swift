import Foundation

/// Which fulfilments a console page lists: filters, and a bounded page.
public struct FulfilmentQuery: Sendable, Equatable {
    /// The largest page the ledger returns.
    public static let maximumPageSize = 100
    /// The last page that may be asked for: deeper pages are a filter's job.
    public static let maximumPage = 10_000

    public var state: FulfilmentState?
    public var productID: String?
    /// Created at or after this time.
    public var from: Date?
    /// Created before this time.
    public var to: Date?
    /// 1-based; clamped to `1...maximumPage`.
    public private(set) var page: Int
    /// Clamped to `1...maximumPageSize`.
    public private(set) var pageSize: Int

    public init(state: FulfilmentState? = nil, productID: String? = nil, from: Date? = nil, to: Date? = nil, page: Int = 1, pageSize: Int = 50) {
        self.state = state
        self.productID = productID
        self.from = from
        self.to = to
        self.page = min(max(page, 1), Self.maximumPage)
        self.pageSize = min(max(pageSize, 1), Self.maximumPageSize)
    }

    /// Rows skipped before this page; never overflows (both factors are bounded).
    public var offset: Int { (page - 1) * pageSize }
}

/// One page of fulfilments and how many match in all.
public struct FulfilmentPage: Sendable, Equatable {
    public var rows: [Fulfilment]
    public var total: Int

    public init(rows: [Fulfilment], total: Int) {
        self.rows = rows
        self.total = total
    }
}

/// An App Store Server Notification on record.
public struct NotificationEntry: Sendable, Equatable {
    public var uuid: String
    public var type: String
    public var subtype: String?
    public var transactionID: String?
    public var originalTransactionID: String?
    /// What the server did with it.
    public var outcome: String
    public var receivedAt: Date

    public init(
        uuid: String, type: String, subtype: String?, transactionID: String?, originalTransactionID: String?, outcome: String, receivedAt: Date
    ) {
        self.uuid = uuid
        self.type = type
        self.subtype = subtype
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.outcome = outcome
        self.receivedAt = receivedAt
    }
}

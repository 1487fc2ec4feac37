import Foundation

/// Which fulfilments a console page lists: filters, and a bounded page.
public struct FulfilmentPageQuery: Sendable, Equatable {
    /// The largest page the ledger returns.
    public static let maximumPageSize = 100
    /// The last page that may be asked for: deeper pages are a filter's job.
    public static let maximumPage = 10_000

    /// Only this state; nil is any.
    public var state: FulfilmentState?
    /// Only this product; nil is any.
    public var productID: String?
    /// Created at or after this time.
    public var from: Date?
    /// Created before this time.
    public var to: Date?
    /// 1-based; clamped to `1...maximumPage`.
    public private(set) var page: Int
    /// Clamped to `1...maximumPageSize`.
    public private(set) var pageSize: Int

    /// A query; `page` and `pageSize` are clamped to their bounds, so no input can ask for more.
    public init(
        state: FulfilmentState? = nil, productID: String? = nil, from: Date? = nil, to: Date? = nil, page: Int = 1, pageSize: Int = 50
    ) {
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
    /// At most the query's page size.
    public var rows: [Fulfilment]
    /// Rows matching the filters, on every page.
    public var total: Int

    /// A page and the total.
    public init(rows: [Fulfilment], total: Int) {
        self.rows = rows
        self.total = total
    }
}

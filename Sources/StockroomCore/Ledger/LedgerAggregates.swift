import Foundation

// The aggregates the console's dashboard reads (`LedgerViews.deliveriesPerHour`, `productTallies`).

/// The attempts log of one hour.
public struct HourlyDeliveries: Sendable, Equatable {
    /// The hour's start (UTC).
    public var hour: Date
    /// Attempts that sent their whole planned body.
    public var complete: Int
    /// Attempts that ended part way.
    public var interrupted: Int
    /// Bytes those attempts sent.
    public var bytes: Int64

    /// One hour's counts, as an engine read them.
    public init(hour: Date, complete: Int, interrupted: Int, bytes: Int64) {
        self.hour = hour
        self.complete = complete
        self.interrupted = interrupted
        self.bytes = bytes
    }

    /// The hour a time falls in, as the engines bucket it (hours since 1970); 0 for a time no
    /// calendar holds.
    public static func hourIndex(_ date: Date) -> Int64 {
        let hours = (date.timeIntervalSince1970 / 3600).rounded(.down)
        guard hours.isFinite, abs(hours) < 1e15 else { return 0 }
        return Int64(exactly: hours) ?? 0
    }
}

/// One product's fulfilments and the bytes sent for them.
public struct ProductTally: Sendable, Equatable {
    public var productID: String
    /// Fulfilments of the product, in any state.
    public var fulfilments: Int
    /// Bytes sent for them over all attempts.
    public var bytesDelivered: Int64

    /// One product's tally.
    public init(productID: String, fulfilments: Int, bytesDelivered: Int64) {
        self.productID = productID
        self.fulfilments = fulfilments
        self.bytesDelivered = bytesDelivered
    }
}

/// The top products and the ledger's totals.
public struct ProductTallies: Sendable, Equatable {
    /// Most fulfilments first, then by product ID.
    public var top: [ProductTally]
    /// Every fulfilment in the ledger.
    public var fulfilments: Int
    /// Bytes sent for every fulfilment.
    public var bytesDelivered: Int64

    /// The top products and the totals.
    public init(top: [ProductTally], fulfilments: Int, bytesDelivered: Int64) {
        self.top = top
        self.fulfilments = fulfilments
        self.bytesDelivered = bytesDelivered
    }
}

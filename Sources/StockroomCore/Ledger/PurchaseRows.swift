/// The rows of one purchase (a transaction, its original and every restore), as a decision
/// reads them inside its database transaction, and what the decision changed.
public struct PurchaseRows: Sendable {
    private var rows: [String: Fulfilment]
    private var insertedIDs: [String] = []
    private var changedIDs: Set<String> = []

    public init(rows: [Fulfilment]) {
        self.rows = Dictionary(rows.map { ($0.transactionID, $0) }, uniquingKeysWith: { first, _ in first })
    }

    public subscript(transactionID: String) -> Fulfilment? { rows[transactionID] }

    /// Every row, in transaction-ID order.
    public var all: [Fulfilment] { rows.values.sorted { $0.transactionID < $1.transactionID } }

    /// Whether any transaction of the purchase is revoked: then every one of them is.
    public var isRevoked: Bool { rows.values.contains { $0.state == .revoked } }

    /// The revocation causes standing on the purchase.
    public var standingRevocation: (byOperator: Date?, byRefund: Date?) {
        (rows.values.compactMap(\.revokedByOperatorAt).min(), rows.values.compactMap(\.revokedByRefundAt).min())
    }

    /// Rows the decision added, in the order it added them.
    public var inserted: [Fulfilment] { insertedIDs.compactMap { rows[$0] } }

    /// Rows the decision changed that were there before it.
    public var changed: [Fulfilment] {
        changedIDs.subtracting(insertedIDs).sorted().compactMap { rows[$0] }
    }

    mutating func insert(_ row: Fulfilment) {
        precondition(rows[row.transactionID] == nil, "a row is inserted once")
        rows[row.transactionID] = row
        insertedIDs.append(row.transactionID)
    }

    mutating func update(_ row: Fulfilment) {
        precondition(rows[row.transactionID] != nil, "only a row read or inserted is updated")
        rows[row.transactionID] = row
        changedIDs.insert(row.transactionID)
    }
}

import Foundation

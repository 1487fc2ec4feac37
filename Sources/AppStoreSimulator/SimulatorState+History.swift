import Foundation
import StockroomCore

/// Get Transaction History v2: every transaction of the customer who made `transactionId`, for
/// that app and environment, in pages of 20 with `hasMore` and an opaque `revision`.
///
/// The simulator's customer is a device: purchases made with one `deviceId` are one customer's.
/// See https://developer.apple.com/documentation/appstoreserverapi/get-transaction-history
/// and https://developer.apple.com/documentation/appstoreserverapi/historyresponse
extension SimulatorState {
    /// Apple's page size: "a maximum of 20 transactions per response".
    static let transactionHistoryPageSize = 20

    /// The query of a history request, as Apple names its parameters.
    struct HistoryQuery: Sendable {
        var revision: String?
        /// `ASCENDING` (the default) or `DESCENDING`, by modification date (here: purchase order).
        var sort: String?
        var productIds: [String] = []
        /// `AUTO_RENEWABLE`, `NON_RENEWABLE`, `CONSUMABLE`, `NON_CONSUMABLE`.
        var productTypes: [String] = []
        /// `true` only revoked transactions, `false` only those not revoked.
        var revoked: String?
    }

    /// The API's answer for `GET /inApps/v2/history/{transactionId}` at `environment`.
    func transactionHistory(_ id: String, query: HistoryQuery, authorization: String?, environment: StoreEnvironment) -> (
        status: Int, body: [UInt8]
    ) {
        let (status, object) = historyAnswer(id, query: query, authorization: authorization, environment: environment)
        return (
            status, Array((try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes, .sortedKeys])) ?? Data())
        )
    }

    private func historyAnswer(_ id: String, query: HistoryQuery, authorization: String?, environment: StoreEnvironment) -> (
        Int, [String: Any]
    ) {
        let bundleID = transactions[id]?.bundleID ?? configuration.bundleID
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: bundleID) {
            return (401, ["errorCode": 4010000, "errorMessage": problem])
        }
        guard let anchor = transactions[id], anchor.environment == environment else {
            return (404, ["errorCode": 4040010, "errorMessage": "Transaction id not found."])
        }
        if let sort = query.sort, sort != "ASCENDING", sort != "DESCENDING" {
            return (400, ["errorCode": 4000020, "errorMessage": "Invalid request sort."])
        }
        if let revoked = query.revoked, revoked != "true", revoked != "false" {
            return (400, ["errorCode": 4000030, "errorMessage": "Invalid request revoked."])
        }
        let start: Int
        if let revision = query.revision {
            guard let offset = Self.offset(ofRevision: revision) else {
                return (400, ["errorCode": 4000005, "errorMessage": "Invalid request revision."])
            }
            start = offset
        } else {
            start = 0
        }
        var customer = (devices[anchor.deviceID] ?? []).compactMap { transactions[$0] }
            .filter { $0.bundleID == anchor.bundleID && $0.environment == environment }
            .filter { query.productIds.isEmpty || query.productIds.contains($0.productID) }
            .filter { query.productTypes.isEmpty || query.productTypes.contains(Self.productType(of: $0)) }
            .filter { query.revoked == nil || (query.revoked == "true") == ($0.cancellationDateMilliseconds != nil) }
        if query.sort == "DESCENDING" { customer.reverse() }
        let page = customer.dropFirst(start).prefix(Self.transactionHistoryPageSize)
        let next = min(start, customer.count) + page.count
        let now = AppleDate.nowMilliseconds()
        do {
            let signed = try page.map { try signedTransaction($0, at: now) }
            return (
                200,
                [
                    "signedTransactions": signed, "hasMore": next < customer.count, "revision": Self.revision(offset: next),
                    "bundleId": anchor.bundleID, "appAppleId": 1_234_567_890, "environment": environment.rawValue,
                ]
            )
        } catch {
            return (500, ["errorCode": 5000000, "errorMessage": "\(error)"])
        }
    }

    /// Apple's `productType` query value for a transaction's StoreKit 2 `type`.
    private static func productType(of transaction: SimulatedTransaction) -> String {
        switch transaction.type {
        case SimulatedTransaction.autoRenewable: "AUTO_RENEWABLE"
        case SimulatedTransaction.nonRenewing: "NON_RENEWABLE"
        case "Consumable": "CONSUMABLE"
        default: "NON_CONSUMABLE"
        }
    }

    /// An opaque token for "the next page starts at `offset`": clients pass it back unread.
    private static func revision(offset: Int) -> String {
        ByteEncoding.base64URL(Array("sim-history:\(offset)".utf8))
    }

    private static func offset(ofRevision revision: String) -> Int? {
        guard revision.utf8.count <= 64, let bytes = ByteEncoding.decodeBase64(revision) else { return nil }
        let text = String(decoding: bytes, as: UTF8.self)
        guard text.hasPrefix("sim-history:"), let offset = Int(text.dropFirst("sim-history:".count)), (0...1_000_000).contains(offset)
        else {
            return nil
        }
        return offset
    }
}

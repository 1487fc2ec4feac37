import Foundation
import StockroomCore

/// App Store Server Notifications V2. An `S` input is `notification payload` + NUL + optional
/// `transaction payload`: both are signed, the transaction placed in `data.signedTransactionInfo`.
enum NotificationHarness {
    static func run(_ input: [UInt8]) {
        guard input.first == FuzzFixtures.signMarker else {
            _ = AppStoreNotification.verify(String(decoding: input, as: UTF8.self), with: FuzzFixtures.transactions)
            return
        }
        let parts = input.dropFirst().split(separator: 0, maxSplits: 1, omittingEmptySubsequences: false)
        var payload = Array(parts.first ?? [])
        if parts.count == 2, let nested = try? FuzzFixtures.chain.sign(payload: Array(parts[1])),
            var object = try? JSONSerialization.jsonObject(with: Data(payload)) as? [String: Any]
        {
            var data = object["data"] as? [String: Any] ?? [:]
            data["signedTransactionInfo"] = nested
            object["data"] = data
            payload = Array((try? JSONSerialization.data(withJSONObject: object)) ?? Data(payload))
        }
        guard let signed = try? FuzzFixtures.chain.sign(payload: payload) else { return }
        _ = AppStoreNotification.verify(signed, with: FuzzFixtures.transactions)
    }
}

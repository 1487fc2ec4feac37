/// The body of `POST /sim/notifications`: a V2 notification of `type` about a transaction.
/// REFUND and REVOKE revoke the transaction first (with `revocationType`, and
/// `revocationPercentage` in milliunits for `REFUND_PRORATED`); REFUND_REVERSED lifts it.
/// CONSUMPTION_REQUEST may carry a `consumptionRequestReason`. RESCIND_CONSENT names the app
/// download the transaction was made in (`appData`), as Apple's does.
///
/// See https://developer.apple.com/documentation/appstoreservernotifications/notificationtype
struct NotificationRequestBody: Decodable {
    var type: String
    var transactionId: String
    var subtype: String?
    var revocationType: String?
    var revocationPercentage: Int?
    var consumptionRequestReason: String?

    /// Why the simulator refuses it, or nil.
    var problem: String? {
        guard SimulatedNotification.types.contains(type) else { return "type must be one of \(SimulatedNotification.types.sorted())" }
        if let subtype, subtype.isEmpty || subtype.utf8.count > 64 { return "subtype must be 1 to 64 characters" }
        if let revocationType {
            guard type == "REFUND" || type == "REVOKE" else { return "revocationType is for REFUND and REVOKE" }
            guard SimulatedNotification.revocationTypes.contains(revocationType) else {
                return "revocationType must be one of \(SimulatedNotification.revocationTypes.sorted())"
            }
        }
        if let revocationPercentage {
            guard revocationType == "REFUND_PRORATED" else { return "revocationPercentage needs revocationType REFUND_PRORATED" }
            guard (0...100_000).contains(revocationPercentage) else { return "revocationPercentage must be from 0 to 100000 (milliunits)" }
        }
        if let consumptionRequestReason {
            guard type == "CONSUMPTION_REQUEST" else { return "consumptionRequestReason is for CONSUMPTION_REQUEST" }
            guard SimulatedNotification.consumptionRequestReasons.contains(consumptionRequestReason) else {
                return "consumptionRequestReason must be one of \(SimulatedNotification.consumptionRequestReasons.sorted())"
            }
        }
        return nil
    }
}

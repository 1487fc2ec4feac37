import Foundation

/// A fulfilment as operators see it (CLI and admin API): everything but the proof itself,
/// which is shown only by length and digest.
public enum FulfilmentView {
    public static func object(_ row: Fulfilment, attempts: [DownloadAttempt]? = nil) -> [String: Any] {
        var object: [String: Any] = [
            "transactionId": row.transactionID, "originalTransactionId": row.originalTransactionID,
            "productId": row.productID, "bundleId": row.bundleID, "state": row.state.rawValue,
            "attempts": row.attempts, "bytesDelivered": row.bytesDelivered, "proofKind": row.proofKind.rawValue,
            "proofLength": row.proof.utf8.count, "proofSha256": ByteEncoding.hex(SHA256.hash(Array(row.proof.utf8))),
            "createdAt": date(row.createdAt), "updatedAt": date(row.updatedAt), "safeToFinish": row.state.isSafeToFinish,
        ]
        object["environment"] = row.environment?.rawValue
        object["verifiedAt"] = row.verifiedAt.map(date)
        object["deliveredAt"] = row.deliveredAt.map(date)
        object["acknowledgedAt"] = row.acknowledgedAt.map(date)
        object["revokedAt"] = row.revokedAt.map(date)
        object["lastError"] = row.lastError
        object["expiresAt"] = row.expiresAt.map(date)
        object["appAccountBound"] = row.appAccountToken != nil
        object["revokedByOperatorAt"] = row.revokedByOperatorAt.map(date)
        object["revokedByRefundAt"] = row.revokedByRefundAt.map(date)
        object["finishedAt"] = row.finishedAt.map(date)
        object["customerConsented"] = row.customerConsented
        if let attempts {
            object["downloadAttempts"] = attempts.map { attempt -> [String: Any] in
                var entry: [String: Any] = ["bytes": attempt.bytes, "outcome": attempt.outcome.rawValue, "at": date(attempt.at)]
                if let start = attempt.rangeStart, let end = attempt.rangeEnd { entry["range"] = "\(start)-\(end)" }
                return entry
            }
        }
        return object
    }

    /// A kept pending proof, without the proof itself.
    public static func object(_ pending: PendingProof) -> [String: Any] {
        var object: [String: Any] = [
            "transactionId": pending.transactionID, "status": pending.status.rawValue, "proofKind": pending.proofKind.rawValue,
            "proofSha256": pending.proofDigest, "requestedProductId": pending.requestedProductID,
            "createdAt": date(pending.createdAt), "updatedAt": date(pending.updatedAt),
        ]
        object["lastError"] = pending.lastError
        return object
    }

    public static func json(_ value: Any) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    public static func date(_ date: Date) -> String { date.ISO8601Format() }
}

import Foundation
import StockroomCore

/// iOS 6 transaction receipts: issued in Apple's property-list format, signed by the
/// simulator's leaf key, and answered in verifyReceipt's legacy shape.
extension SimulatorState {
    /// The transaction receipt of `transaction`: base64 of `{ "signature"; "purchase-info";
    /// "environment"?; "pod"; "signing-status" }`, purchase-info being base64 of its own list.
    func transactionReceipt(for transaction: SimulatedTransaction) throws(SimulatorError) -> String {
        var info: [(String, String)] = [
            ("original-purchase-date-pst", AppleDate.string(milliseconds: transaction.originalPurchaseDateMilliseconds)),
            ("unique-identifier", transaction.deviceID),
            ("original-transaction-id", transaction.originalTransactionID),
            ("bvrs", "1"),
            ("transaction-id", transaction.transactionID),
            ("quantity", "1"),
            ("original-purchase-date-ms", String(transaction.originalPurchaseDateMilliseconds)),
            ("product-id", transaction.productID),
            ("item-id", LegacyReceipt.itemID(transaction.productID)),
            ("bid", transaction.bundleID),
            ("purchase-date-ms", String(transaction.purchaseDateMilliseconds)),
            ("purchase-date", AppleDate.string(milliseconds: transaction.purchaseDateMilliseconds)),
            ("original-purchase-date", AppleDate.string(milliseconds: transaction.originalPurchaseDateMilliseconds)),
        ]
        if let expires = transaction.expiresDateMilliseconds { info.append(("expires-date", String(expires))) }
        let purchaseInfo = ByteEncoding.base64(TransactionReceipt.write(info))
        let environment: String? = transaction.environment == .sandbox ? "Sandbox" : nil
        let signature: [UInt8]
        do {
            signature = try signingChain.signTransactionReceipt(
                TransactionReceipt.signedBytes(purchaseInfoText: purchaseInfo, environment: environment))
        } catch {
            throw .internal("transaction receipt signing failed: \(error)")
        }
        var outer: [(String, String)] = [("signature", ByteEncoding.base64(signature)), ("purchase-info", purchaseInfo)]
        if let environment { outer.append(("environment", environment)) }
        outer += [("pod", "100"), ("signing-status", "0")]
        return ByteEncoding.base64(TransactionReceipt.write(outer))
    }

    /// verifyReceipt's verdict on a transaction receipt: 21003 unless the simulator signed it,
    /// 21004 for a wrong shared secret, 21007/21008 for the other environment, 21006 with
    /// `latest_expired_receipt_info` once a subscription has ended, else 0.
    func verifyTransactionReceipt(_ receipt: TransactionReceipt, password: String?, endpoint: StoreEnvironment) -> VerifyReceiptBody {
        let signedBytes = TransactionReceipt.signedBytes(purchaseInfoText: receipt.purchaseInfoText, environment: receipt.environment)
        guard let signature = receipt.signature.flatMap({ ByteEncoding.decodeBase64($0) }),
            signingChain.isValidTransactionReceiptSignature(signature, for: signedBytes),
            let transaction = transactions[receipt.purchase.transactionID]
        else { return VerifyReceiptBody(status: 21003) }
        if let secret = configuration.sharedSecret, password != secret { return VerifyReceiptBody(status: 21004) }
        switch (transaction.environment, endpoint) {
        case (.sandbox, .production): return VerifyReceiptBody(status: 21007)
        case (.production, .sandbox): return VerifyReceiptBody(status: 21008)
        default: break
        }
        var body = VerifyReceiptBody(status: 0, environment: transaction.environment.rawValue)
        body.legacyReceipt = LegacyReceipt(transaction)
        // Apple's current view: the latest purchase of the same original transaction (a renewal).
        let latest =
            transactions.values.filter { $0.originalTransactionID == transaction.originalTransactionID }
            .max { $0.purchaseDateMilliseconds < $1.purchaseDateMilliseconds } ?? transaction
        if latest.isExpired(at: AppleDate.nowMilliseconds()) {
            body.status = 21006
            body.legacyLatestExpiredReceiptInfo = LegacyReceipt(latest)
        } else if latest.expiresDateMilliseconds != nil {
            body.legacyLatestReceiptInfo = LegacyReceipt(latest)
            body.latestReceipt = try? transactionReceipt(for: latest)
        }
        return body
    }
}

import Foundation
import Testing
@testable import StockroomCore

/// Numbers from outside never trap: every date field of verifyReceipt answers and of JWS
/// payloads, sent as `1e30`, `-1e30`, `NaN`-like strings or huge integers, is refused or read.
@Suite struct HostileVerificationNumberTests {
    static let hostile = [
        "1e30", "-1e30", "\"NaN\"", "\"nan\"", "\"inf\"", "\"-Infinity\"", "\"1e30\"", "99999999999999999999999",
        "-99999999999999999999999", "9223372036854775807", "-9223372036854775808", "\"9223372036854775808\"", "1.7976931348623157e308",
        "\"0x1p62\"", "\"\"", "null", "true", "[1]", "{}", "1700000000000.5", "\"12345678901234567890123456789012345\"",
    ]
    static let receiptDateFields = [
        "purchase_date_ms", "cancellation_date_ms", "expires_date_ms", "expires_date", "cancellation_date", "quantity",
    ]
    static let signedDateFields = ["purchaseDate", "signedDate", "revocationDate", "expiresDate", "revocationReason"]

    static func transaction(_ field: String, _ value: String) -> String {
        var fields = [
            "\"product_id\": \"p.q\"", "\"transaction_id\": \"1\"", "\"original_transaction_id\": \"1\"",
            "\"purchase_date_ms\": \"1700000000000\"",
        ].filter { !$0.hasPrefix("\"\(field)\"") }
        fields.append("\"\(field)\": \(value)")
        return "{" + fields.joined(separator: ", ") + "}"
    }

    @Test(arguments: receiptDateFields)
    func verifyReceiptAnswersNeverTrap(field: String) throws {
        for value in Self.hostile {
            let entry = Self.transaction(field, value)
            let bodies = [
                "{\"status\": 0, \"receipt\": {\"bundle_id\": \"a.b\", \"in_app\": [\(entry)]}, \"latest_receipt_info\": [\(entry)]}",
                "{\"status\": 21006, \"receipt\": \(entry.dropLast()), \"bid\": \"a.b\"}, \"latest_expired_receipt_info\": \(entry)}",
                "{\"status\": \(value), \"receipt\": \(entry)}",
            ]
            for body in bodies {
                if let response = try? JSONDecoder().decode(VerifyReceiptResponse.self, from: Data(body.utf8)) {
                    let receipt = VerifyReceiptClient.receipt(from: response, calledAt: .production)
                    _ = AppStoreReceiptVerifier.check(receipt, VerificationRequest(receiptData: "", productID: "p.q"), bundleID: "a.b")
                    for transaction in receipt.inApp + receipt.latestReceiptInfo {
                        #expect(abs(transaction.purchaseDate) <= Milliseconds.bound)
                        #expect(abs(transaction.expiresDate ?? 0) <= Milliseconds.bound)
                        #expect(abs(transaction.cancellationDate ?? 0) <= Milliseconds.bound)
                    }
                }
            }
        }
    }

    @Test func outOfRangeMillisecondsAreDecodingErrors() {
        for value in ["1e30", "-1e30", "\"NaN\"", "99999999999999999999999", "9223372036854775807"] {
            #expect(throws: DecodingError.self) {
                try JSONDecoder().decode(ReceiptTransaction.self, from: Data(Self.transaction("purchase_date_ms", value).utf8))
            }
        }
        let legacy = try? JSONDecoder().decode(
            ReceiptTransaction.self, from: Data(Self.transaction("expires_date", "\"1700000000000\"").utf8))
        #expect(legacy?.expiresDate == 1_700_000_000_000)
        let formatted = try? JSONDecoder().decode(
            ReceiptTransaction.self, from: Data(Self.transaction("expires_date", "\"2023-11-14 22:13:20 Etc/GMT\"").utf8))
        #expect(formatted?.expiresDate == 1_700_000_000_000)
        let fraction = try? JSONDecoder().decode(
            ReceiptTransaction.self, from: Data(Self.transaction("purchase_date_ms", "1700000000000.75").utf8))
        #expect(fraction?.purchaseDate == 1_700_000_000_000)
    }

    @Test(arguments: signedDateFields)
    func signedTransactionPayloadsNeverTrap(field: String) {
        var decodedAny = false
        for value in Self.hostile {
            var fields: [String: String] = [
                "transactionId": "\"1\"", "productId": "\"p.q\"", "bundleId": "\"a.b\"", "environment": "\"Production\"",
                "purchaseDate": "1700000000000", "signedDate": "1700000000000",
            ]
            fields[field] = value
            let json = "{" + fields.map { "\"\($0.key)\": \($0.value)" }.joined(separator: ", ") + "}"
            if let transaction = try? JSONDecoder().decode(SignedTransaction.self, from: Data(json.utf8)) {
                decodedAny = true
                #expect(abs(transaction.signedDate) <= Milliseconds.bound)
                #expect(abs(transaction.purchaseDate) <= Milliseconds.bound)
                #expect(abs(transaction.expiresDate ?? 0) <= Milliseconds.bound)
                #expect(abs(transaction.revocationDate ?? 0) <= Milliseconds.bound)
            }
        }
        #expect(decodedAny, "null or in-range values still decode")
        #expect(throws: DecodingError.self) {
            try JSONDecoder().decode(
                SignedTransaction.self,
                from: Data(
                    #"""
                    {"transactionId": "1", "productId": "p", "bundleId": "b", "environment": "Production", "purchaseDate": 1, \#
                    "signedDate": 1e30}
                    """#
                    .utf8))
        }
    }

    @Test func checkedConversionsRefuseWhatDoesNotFit() {
        #expect(Milliseconds.checked(Double.nan) == nil)
        #expect(Milliseconds.checked(Double.infinity) == nil)
        #expect(Milliseconds.checked(1e30) == nil)
        #expect(Milliseconds.checked(-1e30) == nil)
        #expect(Milliseconds.checked(1_700_000_000_000.9) == 1_700_000_000_000)
        #expect(Milliseconds.parse("nan") == nil)
        #expect(Milliseconds.parse("1e30") == nil)
        #expect(Milliseconds.parse(String(repeating: "9", count: 40)) == nil)
        #expect(Milliseconds.parse(" 1700000000000 ") == 1_700_000_000_000)
        #expect(Milliseconds.of(.distantFuture) == 64_092_211_200_000)
        #expect(Milliseconds.of(Date(timeIntervalSince1970: 1e300)) == Milliseconds.bound)
    }
}

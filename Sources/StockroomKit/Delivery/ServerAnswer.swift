import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Maps a refusal from Stockroom to the outcome the app acts on: the table in the README.
///
/// Pure, so that every row is tested on its own; `Delivery` handles the token answers
/// (`token_expired`, `token_invalid`, …) itself before it gets here.
enum ServerAnswer {
    /// Codes that say the receipt is stale (it predates the purchase) or unreadable: a refreshed
    /// receipt may carry the purchase.
    static let staleReceiptCodes: Set<String> = [
        "receipt_malformed", "transaction_not_in_receipt", "product_not_in_receipt", "receipt_empty",
    ]

    /// The outcome of an error answer `status` with `code`.
    ///
    /// - Parameters:
    ///   - retryAfter: the `Retry-After` header, when one came.
    ///   - failures: how many retryable failures came before, for the backoff.
    ///   - proofIsReceipt: only a receipt can be refreshed.
    ///   - receiptRefreshed: a receipt was refreshed already for this transaction: no second time.
    static func outcome(
        status: Int, code: String?, message: String?, retryAfter: Duration?, failures: Int, proofIsReceipt: Bool, receiptRefreshed: Bool
    ) -> DeliveryOutcome {
        let code = code ?? Self.fallbackCode(status)
        let reason = OutcomeReason(code: code, message: message ?? HTTPURLResponse.localizedString(forStatusCode: status), status: status)
        if code == "revoked" { return .revoked(reason) }
        if (300...399).contains(status) {
            // Not followed (`ServerOrigin`): the proof stays with the server it was meant for. The
            // 303 and 307 to content that are followed never reach here.
            return .retryLater(
                after: retryAfter ?? Backoff.delay(afterFailures: failures + 1),
                OutcomeReason(
                    code: "redirected",
                    message: "The server answered with a redirect, which the client never follows: configure the server's final URL.",
                    status: status))
        }
        if status == 429 || status == 408 || (500...599).contains(status) {
            return .retryLater(after: retryAfter ?? Backoff.delay(afterFailures: failures + 1), reason)
        }
        if staleReceiptCodes.contains(code), proofIsReceipt, !receiptRefreshed { return .refreshReceipt(reason) }
        return .refused(reason)
    }

    /// A code for an answer without Stockroom's JSON error (a proxy's page, say).
    static func fallbackCode(_ status: Int) -> String {
        switch status {
        case 429: "rate_limited"
        case 500...599: "server_error"
        default: "http_\(status)"
        }
    }

    /// `Retry-After` as seconds or an HTTP date (RFC 9110 §10.2.3), never less than a second nor
    /// more than `Delivery.longestWait`, whatever the number.
    static func retryAfter(_ field: String?, now: Date) -> Duration? {
        guard let field = field?.trimmingCharacters(in: .whitespaces), !field.isEmpty, field.utf8.count <= 64 else { return nil }
        if field.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) {
            return Wait.clamped(seconds: Double(field) ?? .infinity)
        }
        guard let date = HTTPDate.parse(field) else { return nil }
        return Wait.clamped(seconds: date.timeIntervalSince(now))
    }

    /// The `{"error": {"code", "message"}}` body of a refusal, if it is one.
    static func error(in body: Data) -> (code: String, message: String)? {
        struct Envelope: Decodable {
            struct Detail: Decodable {
                var code: String
                var message: String?
            }
            var error: Detail
        }
        guard let envelope = ServerJSON.decode(Envelope.self, from: body) else { return nil }
        return (envelope.error.code, envelope.error.message ?? envelope.error.code)
    }
}

/// Waits as the client keeps them: whole seconds from 1 to `Delivery.longestWait`, whatever a
/// server said or a journal holds, so that no number traps and nothing is shelved for years.
enum Wait {
    static func clamped(seconds: Double) -> Duration {
        let longest = Double(Delivery.longestWait.components.seconds)
        guard !seconds.isNaN else { return .seconds(1) }
        return .seconds(Int64(min(longest, max(1, seconds.rounded(.up)))))
    }

    /// The wait until `date`, at least a second.
    static func until(_ date: Date, now: Date) -> Duration {
        clamped(seconds: date.timeIntervalSince(now))
    }

    /// `after` in seconds, for a date.
    static func seconds(_ after: Duration) -> TimeInterval {
        let (seconds, attoseconds) = after.components
        return min(Double(seconds) + Double(attoseconds) / 1e18, Double(Delivery.longestWait.components.seconds))
    }
}

/// The wait before the next try after a retryable failure with no `Retry-After`: 2 s doubling to an hour.
enum Backoff {
    static func delay(afterFailures failures: Int) -> Duration {
        let exponent = min(max(failures - 1, 0), 11)
        return .seconds(min(3600, 2 * (1 << exponent)))
    }
}

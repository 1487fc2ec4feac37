import Foundation
import Hummingbird
import StockroomCore

/// `/console/fulfilments/{tx}`: one transaction's timeline, proof digest, what the App Store and
/// its notifications said, and the operator's actions on it.
extension ConsolePages {
    func detail(_ transactionID: String, request: Request, session: ConsoleSession) async throws -> ConsoleResponse {
        let pending = try await ledger.pendingProofs(keptUnder: transactionID, limit: PendingProof.perTransaction * 2)
        guard let row = try await ledger.fulfilment(transactionID) else {
            guard !pending.isEmpty else { throw ConsoleError.unknownTransaction(transactionID) }
            return Self.keptProofsOnly(transactionID, pending: pending, request: request, session: session)
        }
        let attempts = try await ledger.attempts(of: transactionID)
        let notifications = try await ledger.notifications(
            transactionID: transactionID, originalTransactionID: row.originalTransactionID, limit: 50)
        let calls = try await ledger.serverCalls(ServerCallListQuery(transactionID: transactionID, limit: 10))
        let rescission = try await ledger.consentRescission(of: row)
        let id = HTML.escape(row.transactionID)

        var body =
            """
            <h1>Transaction <code>\(id)</code> <span class=\"state state-\(row.state.rawValue)\" \
            id=\"state\">\(row.state.rawValue)</span></h1>\n
            """
        if let done = request.uri.queryParameters.get("done").flatMap(ConsoleFlash.init(rawValue:)) {
            body += "<p class=\"flash\" role=\"status\" id=\"flash\" data-flash=\"\(done.rawValue)\">\(HTML.escape(done.message))</p>\n"
        }
        body += "<div class=\"grid\">\n<section class=\"card\"><h2>Purchase</h2><table id=\"summary\">\n"
        let facts: [(String, String)] = [
            ("Product", row.productID), ("Original transaction", row.originalTransactionID), ("Bundle", row.bundleID),
            ("Environment", row.environment?.rawValue ?? "—"), ("Attempts", String(row.attempts)),
            ("Bytes sent", HTML.bytes(row.bytesDelivered)),
            ("Safe to finish", row.state.isSafeToFinish ? "yes" : "no"), ("Expires", HTML.time(row.expiresAt)),
            ("Bound to an app account", row.appAccountToken == nil ? "no" : "yes"),
            (
                "Consent to share consumption",
                rescission.map { "rescinded \(HTML.time($0.rescindedAt)) (RESCIND_CONSENT): nothing is sent" }
                    ?? row.customerConsented.map { $0 ? "yes" : "no" } ?? "not asked"
            ),
        ]
        for (name, value) in facts { body += "<tr><th>\(name)</th><td>\(HTML.escape(value))</td></tr>\n" }
        body += "</table></section>\n<section class=\"card\"><h2>Proof and upstream verdicts</h2><table id=\"verdicts\">\n"
        body +=
            """
            <tr><th>Proof</th><td>\(row.proofKind == .receipt ? "app receipt (verifyReceipt)" : "StoreKit 2 signed transaction"), \
            \(row.proof.utf8.count) bytes</td></tr>\n
            """
        let digest = row.proofDigest ?? ByteEncoding.hex(SHA256.hash(Array(row.proof.utf8)))
        body += "<tr><th>Proof SHA-256</th><td><code id=\"proof-digest\">\(HTML.escape(digest))</code></td></tr>\n"
        body +=
            "<tr><th>Last verified</th><td>"
        body +=
            "\(HTML.time(row.verifiedAt))\(row.environment.map { " by the App Store (\($0.rawValue))" } ?? "")</td></tr>\n"
        body += "<tr><th>Last error</th><td id=\"last-error\">\(HTML.escape(row.lastError ?? "none"))</td></tr>\n"
        for proof in pending {
            body +=
                """
                <tr><th>Kept proof (\(proof.status.rawValue))</th><td>\(HTML.time(proof.updatedAt)): \
                \(HTML.escape(proof.lastError ?? "waiting for the App Store"))
                """
            body += " <code>\(HTML.escape(String(proof.proofDigest.prefix(16))))…</code></td></tr>\n"
        }
        body += Self.serverCalls(calls, row: row)
        body += "</table></section>\n</div>\n"
        body += Self.timeline(row, attempts: attempts)
        body +=
            """
            <h2>Notifications</h2>\n<table \
            id=\"notifications\"><tr><th>Received</th><th>Type</th><th>Transaction</th><th>Outcome</th></tr>\n
            """
        for entry in notifications {
            let type = entry.type + (entry.subtype.map { " / " + $0 } ?? "")
            body +=
                "<tr><td>\(HTML.time(entry.receivedAt))</td><td>\(HTML.escape(type))</td>"
            body +=
                "<td>\(HTML.escape(entry.transactionID ?? "—"))</td>"
            body += "<td>\(HTML.escape(entry.outcome))</td></tr>\n"
        }
        if notifications.isEmpty {
            body += "<tr><td colspan=\"4\" class=\"muted\">No App Store notification names this purchase.</td></tr>\n"
        }
        body += "</table>\n" + Self.events(try await ledger.events(of: transactionID, limit: 100))
        body += Self.actionForms(row, session: session)
        return .page(title: "Transaction \(row.transactionID)", body: body, session: session)
    }

    /// The transaction's events as the ledger recorded them (what webhooks send), in order.
    static func events(_ events: [LedgerEvent]) -> String {
        var html = "<h2>Events</h2>\n<table id=\"events\"><tr><th>#</th><th>When</th><th>Event</th><th>ID</th></tr>\n"
        for event in events {
            html +=
                "<tr data-event=\"\(HTML.escape(event.type.rawValue))\"><td>\(event.sequence)</td><td>\(HTML.time(event.createdAt))</td>"
            html += "<td>\(HTML.escape(event.type.rawValue))</td><td><code>\(HTML.escape(event.eventID))</code></td></tr>\n"
        }
        if events.isEmpty { html += "<tr><td colspan=\"4\" class=\"muted\">No event recorded (or older than the retention).</td></tr>\n" }
        return html + "</table>\n"
    }

    /// A transaction with no entitlement on record, only proofs kept while the App Store could not
    /// be asked: what they are, and the one action that applies (re-fulfil verifies them). A kept
    /// proof never authorises a download, so there is nothing to revoke or reinstate.
    static func keptProofsOnly(_ transactionID: String, pending: [PendingProof], request: Request, session: ConsoleSession)
        -> ConsoleResponse
    {
        let id = HTML.escape(transactionID)
        var body = "<h1>Transaction <code>\(id)</code> <span class=\"state state-pending\" id=\"state\">pending</span></h1>\n"
        if let done = request.uri.queryParameters.get("done").flatMap(ConsoleFlash.init(rawValue:)) {
            body += "<p class=\"flash\" role=\"status\" id=\"flash\" data-flash=\"\(done.rawValue)\">\(HTML.escape(done.message))</p>\n"
        }
        body += "<p>No entitlement is on record. These proofs were kept while the App Store could not be asked; a kept proof never "
        body +=
            """
            authorises a download. Re-fulfil asks the App Store about them: a valid one becomes an entitlement for the product Apple \
            names.</p>\n
            """
        body +=
            """
            <table id=\"kept-proofs\"><tr><th>Kept</th><th>Last tried</th><th>Status</th><th>Proof</th><th>Product asked \
            for</th><th>Why it waits</th></tr>\n
            """
        for proof in pending {
            let kind = proof.proofKind == .receipt ? "app receipt" : "StoreKit 2 signed transaction"
            body +=
                "<tr data-status=\"\(proof.status.rawValue)\"><td>\(HTML.time(proof.createdAt))</td><td>\(HTML.time(proof.updatedAt))</td>"
            body +=
                """
                <td>\(proof.status.rawValue)</td><td>\(kind), \(proof.proof.utf8.count) bytes, \
                <code>\(HTML.escape(String(proof.proofDigest.prefix(16))))…</code></td>
                """
            body +=
                "<td>\(HTML.escape(proof.requestedProductID))</td>"
            body +=
                "<td>\(HTML.escape(proof.lastError ?? "waiting for the App Store"))</td></tr>\n"
        }
        body += "</table>\n<h2>Actions</h2>\n<div class=\"actions\">\n"
        body += "<form method=\"post\" action=\"/console/fulfilments/\(id)/refulfil\" id=\"refulfil\">\(ConsoleResponse.csrfField(session))"
        body += "<p>Ask the App Store about the kept proofs.</p><button type=\"submit\">Re-fulfil</button></form>\n</div>\n"
        return .page(title: "Transaction \(transactionID)", body: body, session: session)
    }

    /// The row's state changes and its download attempts, in time order.
    static func timeline(_ row: Fulfilment, attempts: [DownloadAttempt]) -> String {
        var events: [(Date, String, String)] = [(row.createdAt, "recorded", "first verified claim")]
        if let at = row.verifiedAt {
            events.append((at, "verified", "the App Store vouched for it" + (row.environment.map { " (\($0.rawValue))" } ?? "")))
        }
        if let at = row.deliveredAt { events.append((at, "delivered", "a whole copy went out")) }
        if let at = row.acknowledgedAt { events.append((at, "acknowledged", "the app confirmed it has the file")) }
        if let at = row.finishedAt { events.append((at, "finished", "Stockroom finished the transaction with Apple")) }
        if let at = row.revokedByRefundAt { events.append((at, "revoked", "refunded or revoked by Apple")) }
        if let at = row.revokedByOperatorAt { events.append((at, "revoked", "revoked by an operator")) }
        if let at = row.revokedAt, row.revokedByRefundAt == nil, row.revokedByOperatorAt == nil {
            events.append((at, "revoked", "revoked"))
        }
        for attempt in attempts {
            let range = attempt.rangeStart.map { start in " of bytes \(start)–\(attempt.rangeEnd.map { String($0) } ?? "")" } ?? ""
            events.append(
                (
                    attempt.at, "attempt-\(attempt.outcome.rawValue)",
                    "download \(attempt.outcome.rawValue)\(range): \(HTML.bytes(attempt.bytes))"
                ))
        }
        events.sort { $0.0 < $1.0 }
        var html = "<h2>Timeline</h2>\n<table id=\"timeline\"><tr><th>Time</th><th>Event</th><th>Detail</th></tr>\n"
        for (at, event, detail) in events {
            html +=
                "<tr data-event=\"\(event)\"><td>\(HTML.time(at))</td><td>\(event.replacingOccurrences(of: "-", with: " "))</td>"
            html +=
                "<td>\(HTML.escape(detail))</td></tr>\n"
        }
        html +=
            "<tr data-event=\"updated\"><td>\(HTML.time(row.updatedAt))</td><td>last change</td><td>now \(row.state.rawValue)</td></tr>\n"
        if attempts.count >= DownloadAttempt.keptPerTransaction {
            html +=
                """
                <tr><td colspan=\"3\" class=\"muted\">Only the last \(DownloadAttempt.keptPerTransaction) attempts are kept; the \
                totals above count all.</td></tr>\n
                """
        }
        return html + "</table>\n"
    }

    /// The calls owed to Apple for this transaction (Finish Transaction, a consumption answer, and
    /// on a purchase's original transaction Set App Account Token), as verdict rows.
    static func serverCalls(_ calls: [ServerCall], row: Fulfilment) -> String {
        var html = ""
        for call in calls.sorted(by: { ($0.id ?? 0) < ($1.id ?? 0) }) {
            let name =
                switch call.kind {
                case .finish: "Finish Transaction"
                case .consumption: "Consumption answer"
                case .appAccountToken: "Set App Account Token"
                }
            var detail: String
            switch call.status {
            case .sent: detail = "sent \(HTML.time(call.sentAt)) (\(call.environment.rawValue))"
            case .queued: detail = "waiting: \(call.attempts) tr\(call.attempts == 1 ? "y" : "ies"), next \(HTML.time(call.dueAt))"
            case .skipped: detail = "not sent"
            case .refused: detail = "refused"
            }
            if let error = call.lastError { detail += " — " + error }
            html +=
                """
                <tr data-call=\"\(call.kind.rawValue)\" \
                data-status=\"\(call.status.rawValue)\"><th>\(name)</th><td>\(HTML.escape(detail))</td></tr>\n
                """
        }
        if calls.isEmpty, row.finishedAt == nil { html += "<tr><th>Finish Transaction</th><td class=\"muted\">not queued</td></tr>\n" }
        return html
    }

    /// Refulfil, revoke (reason required) and reinstate, each a form carrying the CSRF token.
    static func actionForms(_ row: Fulfilment, session: ConsoleSession) -> String {
        let base = "/console/fulfilments/" + HTML.escape(row.transactionID)
        let csrf = ConsoleResponse.csrfField(session)
        let reason = "<input name=\"reason\" required maxlength=\"\(ConsoleActions.maximumReasonLength)\" size=\"28\">"
        var html = "<h2>Actions</h2>\n<div class=\"actions\">\n"
        html +=
            """
            <form method=\"post\" action=\"\(base)/refulfil\" id=\"refulfil\">\(csrf)<p>Ask the App Store again about the stored \
            proof.</p>
            """
        html += "<button type=\"submit\">Re-fulfil</button></form>\n"
        html += "<form method=\"post\" action=\"\(base)/revoke\" id=\"revoke\">\(csrf)<label>Reason \(reason)</label>"
        html += "<p><button type=\"submit\">Revoke purchase</button></p></form>\n"
        html += "<form method=\"post\" action=\"\(base)/reinstate\" id=\"reinstate\">\(csrf)<label>Reason \(reason)</label>"
        html += "<p><button type=\"submit\">Reinstate</button></p></form>\n</div>\n"
        return html
    }
}

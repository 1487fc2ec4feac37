import ArgumentParser
import Foundation
import StockroomCore

/// `stockroom fulfilments list | show`: the ledger, read while the server runs.
struct FulfilmentsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "fulfilments",
        abstract: "List or inspect the transactions in the ledger.",
        subcommands: [List.self, Show.self])

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List transactions, most recently changed first.")

        @OptionGroup var options: ServerOptions

        @Option(help: "Only this state: \(FulfilmentState.allCases.map(\.rawValue).joined(separator: ", ")).")
        var state: String?

        @Option(help: "Only this product ID.")
        var product: String?

        @Option(help: "Only those changed since: an ISO 8601 date or time, or an age such as 30m, 24h, 7d.")
        var since: String?

        @Flag(
            help:
                """
                Only transactions whose Finish Transaction call is still queued (Apple down, or waiting for a retry), with its tries \
                and last error.
                """
        )
        var unfinished = false

        @Option(help: "At most this many rows.")
        var limit: Int = 100

        @Flag(help: "Print JSON instead of a table.")
        var json = false

        func run() async throws {
            if state == "pending" { return try await listPending() }
            var filter = FulfilmentListQuery(productID: product, limit: max(1, limit))
            if let state {
                guard let parsed = FulfilmentState(rawValue: state) else {
                    throw ValidationError("state must be one of \(FulfilmentState.allCases.map(\.rawValue).joined(separator: ", "))")
                }
                filter.states = [parsed]
            }
            if let since {
                guard let date = SinceParser.date(since) else {
                    throw ValidationError("--since takes a date (2026-11-20), a time, or an age (24h)")
                }
                filter.since = date
            }
            filter.unfinished = unfinished
            let rows = try await OperatorContext(options: options).ledger.list(filter)
            if unfinished, !json { return try await listUnfinished(rows) }
            if json {
                print(OperatorJSON.string(rows.map { OperatorFulfilment($0) }))
                return
            }
            let header = ["TRANSACTION", "STATE", "PRODUCT", "ENV", "ATTEMPTS", "BYTES", "UPDATED"]
            let table = rows.map { row in
                [
                    row.transactionID, row.state.rawValue, row.productID, row.environment?.rawValue ?? "-", String(row.attempts),
                    String(row.bytesDelivered), OperatorJSON.date(row.updatedAt),
                ]
            }
            print(TextTable.render([header] + table))
            print("\(rows.count) transaction\(rows.count == 1 ? "" : "s")")
            let kept = try await OperatorContext(options: options).ledger.pendingProofs(status: .pending, limit: 1_000_000).count
            if kept > 0 {
                print("\(kept) pending proof\(kept == 1 ? "" : "s") kept while the App Store was unreachable: --state pending lists them")
            }
        }

        /// Transactions waiting for Finish Transaction, with the queued call's state.
        private func listUnfinished(_ rows: [Fulfilment]) async throws {
            let calls = try await OperatorContext(options: options).ledger.serverCalls(
                ServerCallListQuery(kind: .finish, status: .queued, limit: 1_000_000))
            let byTransaction = Dictionary(calls.map { ($0.transactionID, $0) }, uniquingKeysWith: { first, _ in first })
            let header = ["TRANSACTION", "STATE", "PRODUCT", "ENV", "TRIES", "NEXT TRY", "LAST ERROR"]
            let table = rows.map { row in
                let call = byTransaction[row.transactionID]
                return [
                    row.transactionID, row.state.rawValue, row.productID, call?.environment.rawValue ?? "-", String(call?.attempts ?? 0),
                    call.map { OperatorJSON.date($0.dueAt) } ?? "-", String((call?.lastError ?? "-").prefix(60)),
                ]
            }
            print(TextTable.render([header] + table))
            print("\(rows.count) transaction\(rows.count == 1 ? "" : "s") waiting for Finish Transaction; a running server sends them")
        }

        /// Proofs kept apart while the App Store was unreachable: never entitlements.
        private func listPending() async throws {
            let proofs = try await OperatorContext(options: options).ledger.pendingProofs(status: nil, limit: max(1, limit))
            if json {
                print(OperatorJSON.string(proofs.map(PendingProofView.init)))
                return
            }
            let header = ["TRANSACTION", "STATUS", "REQUESTED PRODUCT", "KIND", "PROOF SHA-256", "UPDATED"]
            let table = proofs.map { proof in
                [
                    proof.transactionID, proof.status.rawValue, proof.requestedProductID, proof.proofKind.rawValue,
                    String(proof.proofDigest.prefix(16)), OperatorJSON.date(proof.updatedAt),
                ]
            }
            print(TextTable.render([header] + table))
            print(
                """
                \(proofs.count) kept proof\(proofs.count == 1 ? "" : "s"); `stockroom refulfil --pending` verifies them (`stockroom \
                refulfil ID` those of one transaction)
                """
            )
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Show one transaction and its download attempts (never the receipt itself).")

        @OptionGroup var options: ServerOptions

        @Argument(help: "The transaction ID.")
        var transactionId: String

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            let ledger = try OperatorContext(options: options).ledger
            guard let row = try await ledger.fulfilment(transactionId) else { fail("no transaction \(transactionId) in the ledger") }
            let view = OperatorFulfilment(
                row, attempts: try await ledger.attempts(of: transactionId),
                calls: try await ledger.serverCalls(ServerCallListQuery(transactionID: transactionId, limit: 10)),
                rescission: try await ledger.consentRescission(of: row))
            if json {
                print(OperatorJSON.string(view))
                return
            }
            for line in TextFields.lines(view, skipping: ["downloadAttempts", "serverCalls"]) { print(line) }
            let attempts = view.downloadAttempts ?? []
            print("downloadAttempts: \(attempts.count)")
            for attempt in attempts {
                print("  \(attempt.at)  \(attempt.outcome)  \(attempt.bytes) bytes  range \(attempt.range ?? "-")")
            }
            let calls = view.serverCalls ?? []
            print("serverCalls: \(calls.count)")
            for call in calls {
                print("  \(call.kind)  \(call.status)  \(call.attempts) tries\(call.lastError.map { "  \($0)" } ?? "")")
            }
        }
    }
}

/// `--since` values: ISO 8601 dates or times, or ages like `30m`, `24h`, `7d`.
enum SinceParser {
    static func date(_ text: String, now: Date = Date()) -> Date? {
        if let unit = text.last, let amount = Double(text.dropLast()), amount >= 0 {
            let seconds: Double? =
                switch unit {
                case "s": 1
                case "m": 60
                case "h": 3600
                case "d": 86400
                default: nil
                }
            if let seconds { return now.addingTimeInterval(-amount * seconds) }
        }
        if let time = try? Date(text, strategy: .iso8601) { return time }
        return try? Date(text + "T00:00:00Z", strategy: .iso8601)
    }
}

/// Left-aligned columns separated by two spaces.
enum TextTable {
    static func render(_ rows: [[String]]) -> String {
        guard let columns = rows.map(\.count).max() else { return "" }
        let widths = (0..<columns).map { column in rows.map { column < $0.count ? $0[column].count : 0 }.max() ?? 0 }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell.padding(toLength: widths[index], withPad: " ", startingAt: 0)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}

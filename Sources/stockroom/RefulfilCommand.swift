import ArgumentParser
import Foundation
import StockroomCore
import StockroomEntitlement

/// `stockroom refulfil`: re-verify stored proofs upstream and move their states.
struct RefulfilCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refulfil",
        abstract: "Re-verify stored receipts with the App Store and make transactions downloadable again (or reject / revoke them).",
        discussion: """
            Give one transaction ID (its stored proof, then the pending proofs kept under it: a
            transaction that `fulfilments list --state pending` shows is re-fulfilled from those),
            or --pending (proofs kept while the App Store was down: each valid one becomes an
            entitlement from Apple's answer, each invalid one is marked rejected; each distinct
            proof is sent once, and rejected ones past --rejected-proof-retention are purged),
            or --failed (rejected transactions). A revoked transaction stays revoked:
            only `stockroom reinstate` (an operator's revocation) or Apple's REFUND_REVERSED (a
            refund) lifts it. The server sees the new states at once. Exit status 1 when any
            proof stayed unavailable.

            --history TRANSACTION_ID restores without a receipt: it reads the customer's whole
            transaction history from the App Store Server API (page by page), verifies each
            signed transaction, and records an entitlement for every purchase in the catalogue
            that is not revoked; no app account is checked. Exit status 1 when the App Store
            could not be asked.
            """)

    @OptionGroup var options: ServerOptions

    @Argument(help: "The transaction to re-fulfil.")
    var transactionId: String?

    @Flag(help: "Every kept pending proof.")
    var pending = false

    @Flag(help: "Every rejected transaction.")
    var failed = false

    @Option(help: "Restore every purchase in the App Store's transaction history of this transaction.")
    var history: String?

    @Flag(help: "Ask the App Store, but change nothing.")
    var dryRun = false

    @Flag(help: "Print JSON.")
    var json = false

    func validate() throws {
        let chosen = [transactionId != nil, pending, failed, history != nil].filter { $0 }.count
        guard chosen == 1 else { throw ValidationError("give one transaction ID, --pending, --failed, or --history") }
        if history != nil, dryRun { throw ValidationError("--history has no --dry-run") }
    }

    func run() async throws {
        let context = try OperatorContext(options: options)
        let entitlements = try await context.entitlements()
        if let history { return try await restoreHistory(history, context: context, entitlements: entitlements) }
        var outcomes: [Reverification] = []
        if pending {
            let progress = ProgressBar(enabled: !json)
            outcomes = try await entitlements.refulfilPending(dryRun: dryRun) { done, total in progress.update(done, of: total) }
            progress.finish()
        } else {
            let ids: [String]
            if let transactionId {
                ids = [transactionId]
            } else {
                ids = try await context.ledger.list(FulfilmentListQuery(states: [.rejected], limit: 1_000_000)).map(\.transactionID)
            }
            let progress = ProgressBar(enabled: ids.count > 1 && !json)
            for (index, id) in ids.enumerated() {
                do {
                    outcomes.append(try await entitlements.refulfil(id, dryRun: dryRun))
                } catch LedgerError.unknownTransaction {
                    fail("no transaction \(id) in the ledger")
                }
                progress.update(index + 1, of: ids.count)
            }
            progress.finish()
        }
        if json {
            print(OperatorJSON.string(RefulfilReport(dryRun: dryRun, results: outcomes)))
        } else {
            for outcome in outcomes {
                print("\(outcome.transactionID)  \(outcome.before) → \(outcome.after)  \(outcome.kind.rawValue): \(outcome.detail)")
            }
            let counts = Dictionary(grouping: outcomes, by: \.kind).mapValues(\.count)
            let summary = Reverification.Kind.allCases.compactMap { kind in counts[kind].map { "\($0) \(kind.rawValue)" } }
            print(
                """
                \(dryRun ? "dry run: " : "")re-verified \(outcomes.count): \
                \(summary.isEmpty ? "nothing to do" : summary.joined(separator: ", "))
                """
            )
        }
        if outcomes.contains(where: { $0.kind == .unavailable }) { throw ExitCode(1) }
    }
}

/// `stockroom revoke`: withdraw a purchase by hand (a refund handled outside the App Store).
struct RevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a transaction and every restore of the same purchase; their downloads stop at once.",
        discussion: "Only `stockroom reinstate` lifts an operator's revocation; re-fulfilment never does.")

    @OptionGroup var options: ServerOptions

    @Argument(help: "The transaction to revoke.")
    var transactionId: String

    @Option(help: "Why, kept in the ledger.")
    var reason: String

    func run() async throws {
        let context = try OperatorContext(options: options)
        do {
            let changed = try await context.entitlements().revoke(transactionId, reason: reason)
            print(changed.isEmpty ? "already revoked" : "revoked \(changed.map(\.transactionID).joined(separator: ", "))")
        } catch LedgerError.unknownTransaction {
            fail("no transaction \(transactionId) in the ledger")
        }
    }
}

/// `stockroom reinstate`: lift an operator's revocation.
struct ReinstateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "reinstate",
        abstract: "Lift an operator's revocation of a purchase; its transactions become downloadable again.",
        discussion: """
            A refund's revocation stays until Apple sends REFUND_REVERSED: a purchase revoked both
            by an operator and by a refund stays revoked after reinstate.
            """)

    @OptionGroup var options: ServerOptions

    @Argument(help: "A transaction of the purchase to reinstate.")
    var transactionId: String

    @Option(help: "Why, kept in the ledger.")
    var reason: String

    func validate() throws {
        guard !reason.trimmingCharacters(in: .whitespaces).isEmpty else { throw ValidationError("--reason must say why") }
    }

    func run() async throws {
        let context = try OperatorContext(options: options)
        do {
            let lifted = try await context.entitlements().reinstate(transactionId, reason: reason)
            let state = try await context.ledger.fulfilment(transactionId)?.state.rawValue ?? "unknown"
            print(
                lifted.isEmpty
                    ? "nothing reinstated: \(transactionId) is \(state)"
                    : "reinstated \(lifted.map(\.transactionID).joined(separator: ", "))")
        } catch LedgerError.unknownTransaction {
            fail("no transaction \(transactionId) in the ledger")
        }
    }
}

/// A progress bar on standard error, drawn only when it is a terminal.
final class ProgressBar {
    private let enabled: Bool

    init(enabled: Bool) {
        self.enabled = enabled && isatty(STDERR_FILENO) == 1
    }

    func update(_ done: Int, of total: Int) {
        guard enabled, total > 1 else { return }
        let width = 30
        let filled = width * done / total
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total)".utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

/// `refulfil --json`. Names are the JSON keys.
struct RefulfilReport: Encodable {
    var dryRun: Bool
    var results: [Reverification]
}

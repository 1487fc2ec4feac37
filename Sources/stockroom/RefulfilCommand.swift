import ArgumentParser
import Foundation
import StockroomCore

/// `stockroom refulfil`: re-verify stored receipts upstream and move their states.
struct RefulfilCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "refulfil",
        abstract: "Re-verify stored receipts with the App Store and make transactions downloadable again (or reject / revoke them).",
        discussion: """
            Give one transaction ID, or --pending (receipts kept while the App Store was down), or
            --failed (rejected transactions). The server sees the new states at once. Exit status 1
            when any transaction stayed unavailable.
            """)

    @OptionGroup var options: ServerOptions

    @Argument(help: "The transaction to re-fulfil.")
    var transactionId: String?

    @Flag(help: "Every pending transaction.")
    var pending = false

    @Flag(help: "Every rejected transaction.")
    var failed = false

    @Flag(help: "Ask the App Store, but change nothing.")
    var dryRun = false

    @Flag(help: "Print JSON.")
    var json = false

    func validate() throws {
        let chosen = [transactionId != nil, pending, failed].filter { $0 }.count
        guard chosen == 1 else { throw ValidationError("give one transaction ID, --pending, or --failed") }
    }

    func run() async throws {
        let context = try OperatorContext(options: options)
        let ids: [String]
        if let transactionId {
            ids = [transactionId]
        } else {
            ids = try await context.ledger.list(FulfilmentFilter(states: [pending ? .pending : .rejected], limit: 1_000_000)).map(\.transactionID)
        }
        let refulfilment = try await context.refulfilment()
        let progress = ProgressBar(total: ids.count, enabled: ids.count > 1 && !json)
        var outcomes: [Refulfilment.Outcome] = []
        for (index, id) in ids.enumerated() {
            do {
                outcomes.append(try await refulfilment.refulfil(id, dryRun: dryRun))
            } catch LedgerError.unknownTransaction {
                fail("no transaction \(id) in the ledger")
            }
            progress.update(index + 1)
        }
        progress.finish()
        if json {
            print(FulfilmentView.json(["dryRun": dryRun, "results": outcomes.map(FulfilmentView.object)] as [String: Any]))
        } else {
            for outcome in outcomes {
                print("\(outcome.transactionID)  \(outcome.before.rawValue) → \(outcome.after.rawValue)  \(outcome.kind.rawValue): \(outcome.detail)")
            }
            let counts = Dictionary(grouping: outcomes, by: \.kind).mapValues(\.count)
            let summary = Refulfilment.Outcome.Kind.allCases.compactMap { kind in counts[kind].map { "\($0) \(kind.rawValue)" } }
            print("\(dryRun ? "dry run: " : "")re-verified \(outcomes.count): \(summary.isEmpty ? "nothing to do" : summary.joined(separator: ", "))")
        }
        if outcomes.contains(where: { $0.kind == .unavailable }) { throw ExitCode(1) }
    }
}

extension Refulfilment.Outcome.Kind: CaseIterable {
    public static let allCases: [Self] = [.verified, .rejected, .revoked, .unavailable, .unchanged]
}

/// `stockroom revoke`: withdraw a purchase by hand (a refund handled outside the App Store).
struct RevokeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke",
        abstract: "Revoke a transaction and every restore of the same purchase; their downloads stop at once.")

    @OptionGroup var options: ServerOptions

    @Argument(help: "The transaction to revoke.")
    var transactionId: String

    @Option(help: "Why, kept in the ledger.")
    var reason: String

    func run() async throws {
        let context = try OperatorContext(options: options)
        do {
            let changed = try await context.refulfilment().revoke(transactionId, reason: reason)
            print(changed.isEmpty ? "already revoked" : "revoked \(changed.map(\.transactionID).joined(separator: ", "))")
        } catch LedgerError.unknownTransaction {
            fail("no transaction \(transactionId) in the ledger")
        }
    }
}

/// A progress bar on standard error, drawn only when it is a terminal.
final class ProgressBar {
    private let total: Int
    private let enabled: Bool

    init(total: Int, enabled: Bool) {
        self.total = total
        self.enabled = enabled && isatty(STDERR_FILENO) == 1
    }

    func update(_ done: Int) {
        guard enabled, total > 0 else { return }
        let width = 30
        let filled = width * done / total
        let bar = String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled)
        FileHandle.standardError.write(Data("\r[\(bar)] \(done)/\(total)".utf8))
    }

    func finish() {
        if enabled { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

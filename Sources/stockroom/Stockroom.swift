import ArgumentParser

/// The one executable: the server, and the operator's tools around it.
@main
struct Stockroom: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stockroom",
        abstract: "Delivers App Store server-delivered products: catalogue, verified downloads, ledger.",
        discussion: """
            Every option also reads STOCKROOM_<OPTION> from the environment (--bundle-id reads \
            STOCKROOM_BUNDLE_ID); a flag on the command line wins over the environment.

            Receipts are verified with Apple unless --upstream names a URL (trusting StoreKit 2 \
            signatures only under --trust-root) or the simulator, a test tool served only on \
            loopback (make serve uses it). `stockroom serve --help` lists the limits: timeouts, \
            download slots, the upstream rate per client, verification and token durations, and \
            the sandbox policy.
            """,
        subcommands: [
            Serve.self, SimulatorCommand.self, FulfilmentsCommand.self, RefulfilCommand.self, RevokeCommand.self, ReinstateCommand.self,
            CatalogCommand.self, ContentCommand.self, ReceiptCommand.self, TransactionCommand.self, DoctorCommand.self, DeployCommand.self,
            LedgerCommand.self,
            NotificationsCommand.self, WebhooksCommand.self, ClientCommand.self,
        ]
    )
}

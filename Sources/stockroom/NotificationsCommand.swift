import ArgumentParser
import Foundation
import StockroomCore
import StockroomEntitlement
import StockroomServer

/// `stockroom notifications sync`: recovers notifications the server missed.
struct NotificationsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "notifications",
        abstract: "Reconcile the ledger with the App Store's notification history.",
        subcommands: [Sync.self])

    struct Sync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Apply every App Store notification of a recent window that the ledger has not recorded.",
            discussion: """
                Pages through Get Notification History (POST /inApps/v1/notifications/history) and \
                applies each notification exactly as if Apple had posted it to the server: refunds \
                revoke, reversals reinstate, one-time charges record entitlements, refund requests \
                queue a consumption answer. A notification already recorded (by its UUID) changes \
                nothing, so the sync is safe to run as often as wanted; deploy/ has a systemd timer \
                that runs it hourly. Needs the App Store Server API key (or --upstream simulator).

                Prints a progress line per page on standard error and a summary on standard output; \
                exits 1 when the history could not be read to its end.
                """)

        @OptionGroup var options: ServerOptions
        @OptionGroup(title: "Purchase lifecycle") var lifecycle: LifecycleOptions

        @Option(help: "How far back to look: an age (72h, 7d) or an ISO 8601 date or time. Apple keeps 180 days.")
        var since = "72h"

        @Option(help: "Which history: production, sandbox or both.")
        var environment = "both"

        func run() async throws {
            var configuration = try options.configuration()
            try lifecycle.apply(to: &configuration)
            guard let start = SinceParser.date(since) else { throw ValidationError("--since takes an age (72h) or a date (2026-11-20)") }
            let environments: [StoreEnvironment]
            switch environment {
            case "production": environments = [.production]
            case "sandbox": environments = [.sandbox]
            case "both": environments = [.production, .sandbox]
            default: throw ValidationError("--environment must be production, sandbox or both, not \"\(environment)\"")
            }
            let context = try OperatorContext(options: options)
            let entitlements = try await context.entitlements(
                policy: EntitlementPolicy(
                    reverifyAfter: configuration.reverifyInterval, allowsSandbox: configuration.sandbox == .allow,
                    proratedRefund: configuration.proratedRefund))
            guard let client = entitlements.serverAPI else {
                fail("notifications sync needs the App Store Server API: --app-store-key, --app-store-key-id and --app-store-issuer-id")
            }
            let sync = NotificationSync(entitlements: entitlements, client: client)
            let query = NotificationHistoryQuery(start: start, end: Date())
            var failed = false
            for environment in environments {
                do {
                    let done = try await sync.run(query, environment: environment) { progress in
                        ProgressLine.show(
                            """
                            \(progress.environment.rawValue): \(ProgressLine.bar(progress.covered)) page \(progress.pages), \
                            \(progress.seen) notification\(progress.seen == 1 ? "" : "s"), \(progress.applied) applied
                            """
                        )
                    }
                    ProgressLine.finish()
                    print(Self.summary(done))
                } catch let failure as NotificationSync.Failure {
                    ProgressLine.finish()
                    print("\(environment.rawValue): \(failure)")
                    failed = true
                }
            }
            if failed { throw ExitCode(1) }
        }

        static func summary(_ progress: NotificationSync.Progress) -> String {
            let effects = progress.effects.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
            return
                """
                \(progress.environment.rawValue): \(progress.seen) notification\(progress.seen == 1 ? "" : "s") in \(progress.pages) \
                page\(progress.pages == 1 ? "" : "s"):
                """
                    + " "
                        + """
                        \(progress.applied) applied\(effects.isEmpty ? "" : " (\(effects))"), \(progress.duplicates) already recorded, \
                        \(progress.refused) refused (did not verify)
                        """
        }
    }
}

extension String {
    fileprivate func leftPadded(to width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}

/// One line of progress on standard error, redrawn in place on a terminal.
enum ProgressLine {
    private static let terminal = isatty(STDERR_FILENO) == 1

    static func show(_ text: String) {
        FileHandle.standardError.write(Data((terminal ? "\r\u{1B}[K" + text : text + "\n").utf8))
    }

    /// `[##########----------]  50%`: how much of the window is done.
    static func bar(_ fraction: Double, width: Int = 20) -> String {
        let clamped = fraction.isFinite ? min(max(fraction, 0), 1) : 0
        let filled = Int((clamped * Double(width)).rounded(.down))
        let percent = Int((clamped * 100).rounded(.down))
        return "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: width - filled) + "] "
            + String(percent).leftPadded(to: 3) + "%"
    }

    static func finish() {
        if terminal { FileHandle.standardError.write(Data("\n".utf8)) }
    }
}

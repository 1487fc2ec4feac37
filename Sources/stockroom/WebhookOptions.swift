import ArgumentParser
import Foundation
import StockroomServer

/// Where the ledger's events are pushed (`serve`, and the `webhooks` commands), each also read
/// from `STOCKROOM_<NAME>`.
struct WebhookOptions: ParsableArguments {
    @Option(
        name: .customLong("webhook"),
        help: ArgumentHelp(
            """
            Push the ledger's events to this URL (repeatable; https, or http to a loopback host). Each is named by its URL \
            (webhook- and 8 hex digits) and signed with a secret derived from the download-token key: `stockroom webhooks list \
            --show-secrets` prints it (STOCKROOM_WEBHOOK, URLs separated by spaces).
            """,
            valueName: "url"))
    var urls: [String] = []

    @Option(
        name: .customLong("webhooks"),
        help: ArgumentHelp(
            """
            A JSON file of endpoints: {"endpoints": [{"name", "url", "secrets": [newest, previous]}]}; two secrets while one \
            is rotated (STOCKROOM_WEBHOOKS).
            """,
            valueName: "file"))
    var file: String?

    @Option(
        help: ArgumentHelp(
            "Park a delivery that has failed for this long (STOCKROOM_WEBHOOK_GIVE_UP_AFTER; default 1d).", valueName: "duration"))
    var webhookGiveUpAfter: String?

    @Option(help: ArgumentHelp("Keep the event log this long (STOCKROOM_EVENT_RETENTION; default 30d).", valueName: "duration"))
    var eventRetention: String?

    /// For tests: the first retry's wait, a request's timeout, and how often the log is read.
    @Option(help: .hidden) var webhookFirstRetry: String?
    @Option(help: .hidden) var webhookTimeout: String?
    @Option(help: .hidden) var webhookInterval: String?

    func apply(to configuration: inout ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        configuration.webhookURLs = urls.isEmpty ? (environment["STOCKROOM_WEBHOOK"]?.split(separator: " ").map(String.init) ?? []) : urls
        configuration.webhooksFile = file ?? environment["STOCKROOM_WEBHOOKS"]
        func duration(_ flag: String?, _ name: String, _ option: String) throws -> Duration? {
            guard let text = flag ?? environment["STOCKROOM_\(name)"] else { return nil }
            // Tests shorten the hidden timings below a second.
            if text.hasSuffix("ms"), let milliseconds = Int(text.dropLast(2)), (1...3_600_000).contains(milliseconds) {
                return .milliseconds(milliseconds)
            }
            do { return try DurationArgument.parse(text) } catch { throw ValidationError("--\(option): \(error)") }
        }
        var settings = configuration.webhookSettings
        if let value = try duration(webhookGiveUpAfter, "WEBHOOK_GIVE_UP_AFTER", "webhook-give-up-after") { settings.giveUpAfter = value }
        if let value = try duration(eventRetention, "EVENT_RETENTION", "event-retention") { settings.retention = value }
        if let value = try duration(webhookFirstRetry, "WEBHOOK_FIRST_RETRY", "webhook-first-retry") {
            settings.firstRetry = value
            settings.longestWait = max(value, .milliseconds(1)) * 8
        }
        if let value = try duration(webhookTimeout, "WEBHOOK_TIMEOUT", "webhook-timeout") { settings.timeout = value }
        if let value = try duration(webhookInterval, "WEBHOOK_INTERVAL", "webhook-interval") { settings.interval = value }
        configuration.webhookSettings = settings
    }
}

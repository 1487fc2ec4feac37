import ArgumentParser
import Foundation
import StockroomCore
import StockroomServer

/// `stockroom webhooks`: the configured endpoints, their deliveries, and redelivery.
struct WebhooksCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "webhooks",
        abstract: "List webhook endpoints and deliveries, redeliver, send a test event.",
        discussion: """
            Endpoints come from the same --webhook and --webhooks options (or STOCKROOM_WEBHOOK and \
            STOCKROOM_WEBHOOKS) as `serve`; deliveries from the ledger, which the server's sender works through.
            """,
        subcommands: [List.self, Deliveries.self, Redeliver.self, Events.self, Test.self])

    /// The configured endpoints, checked, with the ledger's context.
    static func endpoints(_ options: ServerOptions, _ webhooks: WebhookOptions) throws -> (OperatorContext, [WebhookEndpoint]) {
        let context = try OperatorContext(options: options)
        var configuration = context.configuration
        try webhooks.apply(to: &configuration)
        let key: [UInt8]
        do {
            key = try DownloadTokenSigner.loadKey(configured: configuration.tokenSecret, file: configuration.tokenSecretPath)
        } catch {
            fail("the download-token key, from which --webhook secrets are derived, cannot be read: \(error)")
        }
        do { return (context, try configuration.webhookEndpoints(tokenKey: key)) } catch { fail(error.description) }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Each endpoint with its queue: queued, sent, parked, the oldest queued.")
        @OptionGroup var options: ServerOptions
        @OptionGroup(title: "Webhooks") var webhooks: WebhookOptions
        @Flag(help: "Print each endpoint's secrets too (what its receiver verifies signatures with).") var showSecrets = false
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            let (context, endpoints) = try WebhooksCommand.endpoints(options, webhooks)
            let stats = try await context.ledger.webhookStats(endpoints: endpoints.map(\.name))
            let listed = endpoints.map { endpoint in
                OperatorEndpoint(endpoint, stats: stats.first { $0.endpoint == endpoint.name }, showingSecrets: showSecrets)
            }
            if json { return print(OperatorJSON.string(["endpoints": listed])) }
            if listed.isEmpty { print("no webhook endpoint is configured (--webhook URL, --webhooks FILE)") }
            for endpoint in listed {
                print("\(endpoint.name)  \(endpoint.url)")
                print("  queued \(endpoint.queued), sent \(endpoint.sent), parked \(endpoint.parked)")
                if let oldest = endpoint.oldestQueuedAt { print("  oldest queued since \(oldest)") }
                for secret in endpoint.secrets ?? [] { print("  secret \(secret)") }
            }
        }
    }

    struct Deliveries: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Deliveries on record, newest first.")
        @OptionGroup var options: ServerOptions
        @Option(help: "Only to this endpoint.") var endpoint: String?
        @Option(help: "Only queued, sent or parked.") var status: String?
        @Option(help: "Only of this transaction.") var transaction: String?
        @Option(help: "At most this many (1 to 10000).") var limit = 100
        @Flag(help: "Print JSON.") var json = false

        func run() async throws {
            var query = WebhookDeliveryQuery(endpoint: endpoint, transactionID: transaction, limit: limit)
            guard (1...10_000).contains(limit) else { throw ValidationError("--limit must be from 1 to 10000") }
            if let status {
                guard let parsed = WebhookDelivery.Status(rawValue: status) else {
                    throw ValidationError("--status must be queued, sent or parked, not \"\(status)\"")
                }
                query.status = parsed
            }
            let context = try OperatorContext(options: options)
            let deliveries = try await context.ledger.webhookDeliveries(query).map(OperatorDelivery.init)
            if json { return print(OperatorJSON.string(["deliveries": deliveries])) }
            if deliveries.isEmpty { print("no delivery matches") }
            for delivery in deliveries {
                var line = "\(delivery.id)  \(delivery.endpoint)  \(delivery.type)  \(delivery.transactionId)#\(delivery.sequence)"
                line += "  \(delivery.status)  tries \(delivery.attempts)"
                if let status = delivery.lastStatus { line += "  HTTP \(status)" }
                if let error = delivery.lastError { line += "  \(error)" }
                print(line)
            }
        }
    }

    struct Redeliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Queue deliveries again, due now (a parked one, or a sent one to send once more).",
            discussion: "The event keeps its ID and body: a receiver that had it sees a duplicate it can drop.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "Delivery IDs, as `webhooks deliveries` lists them.") var ids: [Int64] = []
        @Flag(help: "Every parked delivery (of --endpoint only, when given).") var parked = false
        @Option(help: "With --parked: only those to this endpoint.") var endpoint: String?

        func run() async throws {
            guard parked != !ids.isEmpty else { throw ValidationError("name delivery IDs, or pass --parked") }
            let context = try OperatorContext(options: options)
            var targets = ids
            if parked {
                let query = WebhookDeliveryQuery(endpoint: endpoint, status: .parked, limit: 100_000)
                targets = try await context.ledger.webhookDeliveries(query).compactMap(\.delivery.id)
            }
            var missing: [Int64] = []
            for id in targets where try await !context.ledger.redeliver(id, now: Date()) { missing.append(id) }
            print("queued again: \(targets.count - missing.count)")
            if !missing.isEmpty { fail("no delivery \(missing.map(String.init).joined(separator: ", "))") }
        }
    }

    struct Events: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "A transaction's events, in order, as the ledger recorded them.")
        @OptionGroup var options: ServerOptions
        @Argument(help: "The transaction ID.") var transaction: String
        @Flag(help: "Print each event's body, as webhooks send it.") var bodies = false

        func run() async throws {
            let context = try OperatorContext(options: options)
            let events = try await context.ledger.events(of: transaction, limit: 1000)
            if events.isEmpty { print("no event recorded for \(transaction)") }
            for event in events {
                print("#\(event.sequence)  \(OperatorJSON.date(event.createdAt))  \(event.type.rawValue)  \(event.eventID)")
                if bodies { print("  \(event.body)") }
            }
        }
    }

    struct Test: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send one signed test event (type webhook.test) to an endpoint now, and print its answer.",
            discussion: "Nothing is written to the ledger; the event goes out once. Exits 1 unless the receiver answers 2xx.")
        @OptionGroup var options: ServerOptions
        @OptionGroup(title: "Webhooks") var webhooks: WebhookOptions
        @Argument(help: "The endpoint's name (`webhooks list`).") var name: String

        func run() async throws {
            let (context, endpoints) = try WebhooksCommand.endpoints(options, webhooks)
            guard let endpoint = endpoints.first(where: { $0.name == name }) else {
                fail("no webhook endpoint named \"\(name)\"; configured: \(endpoints.map(\.name).joined(separator: ", "))")
            }
            let sender = WebhookSender(
                ledger: context.ledger, endpoints: [endpoint], settings: context.configuration.webhookSettings, logger: .init(label: "test")
            )
            let eventID = UUID().uuidString.lowercased()
            let body = OperatorJSON.string(["id": eventID, "type": "webhook.test", "createdAt": OperatorJSON.date(Date())])
            let result = await sender.send(.test(eventID: eventID, body: body, endpoint: endpoint.name), to: endpoint)
            switch result {
            case .sent(let status): print("delivered: HTTP \(status)")
            case .retry(let error, _, _), .parked(let error, _): fail("not delivered: \(error)")
            }
        }
    }
}

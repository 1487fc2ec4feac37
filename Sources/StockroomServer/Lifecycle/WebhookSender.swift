import Foundation
import Logging
import NIOPosix
import ServiceLifecycle
import StockroomCore

/// How webhooks are sent: the timings an operator may change, and the ones tests shorten.
public struct WebhookSettings: Sendable, Equatable {
    /// A delivery that has failed for this long is parked (kept for an operator to redeliver).
    public var giveUpAfter: Duration = .seconds(24 * 3600)
    /// The first retry's wait; each next one doubles, to `longestWait`, with jitter.
    public var firstRetry: Duration = .seconds(10)
    public var longestWait: Duration = .seconds(3600)
    /// One request's whole time, connection included.
    public var timeout: Duration = .seconds(10)
    /// How many requests one endpoint has in flight at once (each a different transaction's).
    public var concurrency = 4
    /// How often the event log is read when nothing wakes the sender.
    public var interval: Duration = .seconds(1)
    /// Events older than this are deleted, with their deliveries.
    public var retention: Duration = .seconds(30 * 24 * 3600)

    public init() {}
}

/// Sends the ledger's events to the configured webhook endpoints: queues a delivery of each new
/// event to each endpoint, then sends each endpoint's deliveries, signed, from a loop and a
/// libcurl pool of its own, so a slow or dead receiver slows neither a download nor another
/// endpoint. The queue is the ledger's, so an event written before a crash is sent after it; each
/// delivery is leased to one sender, so instances sharing a PostgreSQL ledger send it once (at
/// least once: a crash after the send and before its record sends it again, same ID, same body).
///
/// 2xx is received. 410 Gone parks the delivery at once; any other answer (a redirect too: none
/// is followed) or none is retried, after `firstRetry` doubling to `longestWait` with jitter, or
/// after the receiver's `Retry-After` when longer, until `giveUpAfter` has passed; then it is parked.
public struct WebhookSender: Service, CustomStringConvertible {
    let ledger: any Ledger
    let endpoints: [WebhookEndpoint]
    let settings: WebhookSettings
    let logger: Logger
    private let clients: [String: CurlHTTPClient]
    private let wakeUps: [String: WakeUps]

    public var description: String { "WebhookSender" }

    public init(ledger: any Ledger, endpoints: [WebhookEndpoint], settings: WebhookSettings, logger: Logger) {
        self.ledger = ledger
        self.endpoints = endpoints
        self.settings = settings
        self.logger = logger
        var clients: [String: CurlHTTPClient] = [:]
        for endpoint in endpoints {
            let pool = NIOThreadPool(numberOfThreads: max(1, settings.concurrency))
            pool.start()
            // A 2xx is received whatever follows it: the status is read, 64 KiB of the body at most.
            let configuration = CurlHTTPClient.Configuration(
                connectTimeout: min(.seconds(5), settings.timeout), totalTimeout: settings.timeout, maximumResponseBytes: 64 << 10,
                bodyPastLimit: .cut)
            clients[endpoint.name] = CurlHTTPClient(configuration: configuration, threadPool: pool)
        }
        self.clients = clients
        wakeUps = Dictionary(uniqueKeysWithValues: endpoints.map { ($0.name, WakeUps()) })
    }

    public func run() async throws {
        if !endpoints.isEmpty { StockroomMetrics.registerWebhooks(endpoints.map(\.name)) }
        await cancelWhenGracefulShutdown {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await fanOutLoop() }
                for endpoint in endpoints {
                    group.addTask { await sendLoop(endpoint) }
                }
            }
        }
    }

    /// Queues deliveries of new events (with no endpoint, only marks those past the give-up window
    /// handled), parks what
    /// waits for an endpoint no longer configured, purges old events, and keeps the queue gauges.
    private func fanOutLoop() async {
        var lastPurge = Date.distantPast
        var gauges: (stats: [WebhookQueueStats], next: ContinuousClock.Instant)?
        // With no endpoint there is nothing to send soon: the log is only kept.
        let interval = endpoints.isEmpty ? max(settings.interval, .seconds(10)) : settings.interval
        while !Task.isCancelled {
            do {
                let names = endpoints.map(\.name)
                if names.isEmpty {
                    // Marked only once older than the give-up window: an instance with endpoints
                    // sharing the ledger (a rolling change of configuration) fans them out first.
                    let before = Date().addingTimeInterval(-settings.giveUpAfter.seconds)
                    while try await ledger.markEventsHandled(before: before, limit: 500) > 0, !Task.isCancelled {}
                } else {
                    while try await ledger.fanOut(to: names, limit: 500, now: Date()) > 0, !Task.isCancelled {
                        for wakeUp in wakeUps.values { wakeUp.signal() }
                    }
                }
                if Date().timeIntervalSince(lastPurge) > 600 {
                    lastPurge = Date()
                    let now = Date()
                    // Queued past the give-up window for an endpoint this instance does not know: abandoned.
                    _ = try await ledger.parkAbandonedDeliveries(
                        keeping: names, queuedBefore: now.addingTimeInterval(-settings.giveUpAfter.seconds), now: now)
                    let cutoff = now.addingTimeInterval(-settings.retention.seconds)
                    while try await ledger.purgeEvents(before: cutoff, limit: 1000) > 0, !Task.isCancelled {}
                }
                if !names.isEmpty {
                    if let kept = gauges, ContinuousClock.now < kept.next {
                        // The counts as last read; the oldest's age as of now.
                        StockroomMetrics.webhookQueues(kept.stats, now: Date())
                    } else {
                        let began = ContinuousClock.now
                        let stats = try await ledger.webhookStats(endpoints: names, countingSent: false)
                        StockroomMetrics.webhookQueues(stats, now: Date())
                        gauges = (stats, .now + Self.gaugesRest(afterCounting: .now - began))
                    }
                }
            } catch {
                logger.warning("the event log could not be read for webhooks", metadata: ["error": "\(error)"])
            }
            try? await Task.sleep(for: interval)
        }
    }

    /// How long the queue's gauges keep their counts after a count that took `counting`: a count
    /// passes over every queued delivery, and behind a long backlog (a million rows take a good
    /// part of a second) counting every second would be most of the sender's work. Counting
    /// takes at most 1 % of the time: none after a count of 10 ms or less, 50 s after one of half
    /// a second.
    static func gaugesRest(afterCounting counting: Duration) -> Duration {
        counting > .milliseconds(10) ? counting * 99 : .zero
    }

    /// Sends one endpoint's due deliveries, a batch at a time, each batch's requests at once.
    private func sendLoop(_ endpoint: WebhookEndpoint) async {
        while !Task.isCancelled {
            do {
                while try await sendDue(endpoint) > 0, !Task.isCancelled {}
            } catch {
                logger.warning("webhook deliveries could not be read", metadata: ["endpoint": .string(endpoint.name), "error": "\(error)"])
            }
            await wakeUps[endpoint.name]?.wait(upTo: settings.interval)
        }
    }

    /// Sends the deliveries to `endpoint` due now, one batch; returns how many were leased.
    @discardableResult
    func sendDue(_ endpoint: WebhookEndpoint, now: Date = Date()) async throws -> Int {
        // The lease outlives the longest request and its record, so a delivery in flight is never
        // sent twice at once; one an instance held when it died is sent again once it runs out.
        let lease = settings.timeout.seconds + 10
        let leased = try await ledger.leaseWebhookDeliveries(
            endpoint: endpoint.name, limit: settings.concurrency, until: now.addingTimeInterval(lease), now: now)
        await withTaskGroup(of: Void.self) { group in
            for delivery in leased {
                group.addTask {
                    guard let id = delivery.delivery.id else { return }
                    let result: WebhookDeliveryResult
                    if Task.isCancelled {
                        result = .retry(error: "not sent: the server was stopping", status: nil, retryAt: Date())
                    } else {
                        result = await send(delivery, to: endpoint)
                    }
                    // Recorded even while the server stops (GRDB refuses a cancelled task's write).
                    let ledger = ledger
                    do {
                        let lease = delivery.delivery.leasedUntil
                        try await Task { try await ledger.completeWebhookDelivery(id, result, lease: lease, now: Date()) }.value
                    } catch {
                        logger.warning(
                            "a webhook delivery's outcome could not be recorded; it is sent again when its lease ends",
                            metadata: ["endpoint": .string(endpoint.name), "event": .string(delivery.eventID), "error": "\(error)"])
                    }
                    StockroomMetrics.webhookDelivery(endpoint: endpoint.name, result: result)
                    log(delivery, endpoint, result)
                }
            }
        }
        return leased.count
    }

    /// One request, and what it came to.
    public func send(_ delivery: LeasedDelivery, to endpoint: WebhookEndpoint) async -> WebhookDeliveryResult {
        let body = Array(delivery.body.utf8)
        let request = UpstreamRequest(
            method: .post, url: endpoint.url,
            headers: [
                ("Content-Type", "application/json"),
                ("User-Agent", "Stockroom-Webhooks/1"),
                ("Stockroom-Event-Id", delivery.eventID),
                ("Stockroom-Event-Type", delivery.type),
                ("Stockroom-Delivery-Attempt", String(delivery.delivery.attempts + 1)),
                (WebhookSignature.header, WebhookSignature.value(body: body, time: Date(), secrets: endpoint.secrets)),
            ],
            body: body, timeout: settings.timeout)
        guard let client = clients[endpoint.name] else { return .parked(error: "no client for this endpoint", status: nil) }
        do {
            let response = try await client.send(request)
            switch response.status {
            case 200..<300:
                return .sent(status: response.status)
            case 410:
                return .parked(error: "the receiver answered 410 Gone", status: 410)
            case 300..<400:
                return failed(delivery, "the receiver answered \(response.status), a redirect (none is followed)", response)
            default:
                return failed(delivery, "the receiver answered \(response.status)", response)
            }
        } catch {
            return failed(delivery, error.description, nil)
        }
    }

    /// A try that did not deliver: retried after the backoff (or the receiver's `Retry-After`),
    /// or parked once `giveUpAfter` has passed since the delivery was queued.
    private func failed(_ leased: LeasedDelivery, _ error: String, _ response: UpstreamResponse?) -> WebhookDeliveryResult {
        let now = Date()
        let status = response?.status
        if now.timeIntervalSince(leased.delivery.createdAt) >= settings.giveUpAfter.seconds {
            return .parked(error: "given up after \(leased.delivery.attempts + 1) tries: \(error)", status: status)
        }
        let retryAfter = response.flatMap { RetryPolicy.wait(retryAfter: $0.headers["retry-after"])?.seconds }
        let wait = Self.backoff(afterAttempts: leased.delivery.attempts, settings: settings, retryAfter: retryAfter)
        return .retry(error: error, status: status, retryAt: now.addingTimeInterval(wait))
    }

    /// The wait before the next try after `attempts` earlier failures: `firstRetry` doubling to
    /// `longestWait`, each scaled by a random factor in [0.5, 1] so that many deliveries failed at
    /// once do not come back at once; a longer `Retry-After` wins, up to `giveUpAfter`.
    static func backoff(afterAttempts attempts: Int, settings: WebhookSettings, retryAfter: TimeInterval?) -> TimeInterval {
        let doubling = min(settings.firstRetry.seconds * pow(2, Double(min(attempts, 30))), settings.longestWait.seconds)
        let jittered = doubling * Double.random(in: 0.5...1)
        guard let retryAfter, retryAfter > jittered else { return jittered }
        return min(retryAfter, settings.giveUpAfter.seconds)
    }

    private func log(_ delivery: LeasedDelivery, _ endpoint: WebhookEndpoint, _ result: WebhookDeliveryResult) {
        var metadata: Logger.Metadata = [
            "endpoint": .string(endpoint.name), "event": .string(delivery.eventID), "type": .string(delivery.type),
        ]
        switch result {
        case .sent: logger.debug("webhook delivered", metadata: metadata)
        case .retry(let error, _, let at):
            metadata["error"] = .string(error)
            metadata["retryAt"] = .string(at.ISO8601Format())
            logger.notice("webhook not delivered; retried later", metadata: metadata)
        case .parked(let error, _):
            metadata["error"] = .string(error)
            logger.warning("webhook delivery parked: redeliver it with `stockroom webhooks redeliver`", metadata: metadata)
        }
    }
}

extension Duration {
    /// The duration in seconds, fractions kept.
    var seconds: TimeInterval {
        TimeInterval(components.seconds) + TimeInterval(components.attoseconds) / 1e18
    }
}

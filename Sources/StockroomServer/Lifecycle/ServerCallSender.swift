import Foundation
import Logging
import ServiceLifecycle
import StockroomCore

/// Sends the calls the ledger says Stockroom owes the App Store Server API: Finish Transaction,
/// consumption answers and Set App Account Token. The queue is the ledger's (`server_calls`), so a call queued before
/// a crash or an outage is sent after it; each call is leased to one sender, so instances
/// sharing a PostgreSQL ledger send each call once.
///
/// A transient failure (429 with `Retry-After`, 5xx, a timeout) is retried with backoff, from
/// 2 s doubling to an hour; a refusal (another 4xx, an unknown transaction) settles the call.
public struct ServerCallSender: Service, CustomStringConvertible {
    let ledger: any Ledger
    let client: AppStoreServerAPIClient
    let catalog: CatalogStore
    let refundPreference: ConsumptionInformation.RefundPreference?
    /// How often the queue is read when nothing wakes the sender.
    let interval: Duration
    let wakeUps: WakeUps
    let logger: Logger
    /// How long one sender holds a call.
    static let lease: TimeInterval = 60
    /// Past this many failed tries a call is given up (about four days at the hourly cap).
    static let maximumAttempts = 100
    /// How long a consumption answer waits for a download under way to report its end: Apple
    /// expects the answer within 12 hours of its request.
    static let consumptionPatience: TimeInterval = 11 * 3600

    public var description: String { "ServerCallSender" }

    init(
        ledger: any Ledger, client: AppStoreServerAPIClient, catalog: CatalogStore,
        refundPreference: ConsumptionInformation.RefundPreference?,
        interval: Duration, logger: Logger
    ) {
        self.ledger = ledger
        self.client = client
        self.catalog = catalog
        self.refundPreference = refundPreference
        self.interval = interval
        self.wakeUps = WakeUps()
        self.logger = logger
    }

    /// Wakes the sender now (a call was just queued).
    public func wake() { wakeUps.signal() }

    public func run() async throws {
        StockroomMetrics.registerServerCalls()
        await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                do {
                    while try await sendDue() > 0, !Task.isCancelled {}
                } catch {
                    logger.warning("the queue of App Store Server API calls could not be read", metadata: ["error": "\(error)"])
                }
                await wakeUps.wait(upTo: interval)
            }
        }
    }

    /// Sends every call that is due now, one batch; returns how many were sent or settled.
    @discardableResult
    func sendDue(now: Date = Date()) async throws -> Int {
        let calls = try await ledger.leaseServerCalls(limit: 16, until: now.addingTimeInterval(Self.lease), now: now)
        for call in calls {
            guard let id = call.id else { continue }
            // Shutting down: the rest are given back now, not held until their lease runs out.
            let settled: ServerCallResult
            if Task.isCancelled {
                settled = .retry(error: "not sent: the server was stopping", retryAt: Date())
            } else {
                settled = await send(call)
            }
            // Recorded even while the server stops (GRDB refuses a cancelled task's write).
            let ledger = ledger
            try await Task { try await ledger.completeServerCall(id, settled, now: Date()) }.value
            StockroomMetrics.serverCall(kind: call.kind, result: settled)
            log(call, settled)
        }
        return calls.count
    }

    private func send(_ call: ServerCall) async -> ServerCallResult {
        switch call.kind {
        case .finish:
            return settle(call, await client.finishTransaction(call.transactionID, environment: call.environment), body: nil)
        case .consumption:
            return await sendConsumption(call)
        case .appAccountToken:
            // The body was written with the binding: the account bound then is the one Apple learns.
            guard let request = UpdateAppAccountTokenRequest(json: call.body) else {
                return .refused(error: "refused (HTTP 0): no app account token queued with the call")
            }
            return settle(
                call, await client.setAppAccountToken(call.transactionID, environment: call.environment, request), body: call.body)
        }
    }

    /// A refund request's answer, built from the ledger as it stands now; nothing is sent when the
    /// ledger cannot support an answer (recorded skipped, with why), nor without consent.
    private func sendConsumption(_ call: ServerCall) async -> ServerCallResult {
        // A ledger that cannot be read leaves the call queued for the next try: neither "no
        // consent" nor "not rescinded" is assumed.
        let row: Fulfilment?
        let rescission: ConsentRescission?
        do {
            row = try await ledger.fulfilment(call.transactionID)
            let environment = row?.environment ?? call.environment
            if let app = call.appTransactionID ?? row?.appTransactionID {
                rescission = try await ledger.consentRescission(of: app, environment: environment)
            } else {
                rescission = nil
            }
        } catch {
            return settle(call, .retryLater(reason: "the ledger could not be read: \(error)", after: nil), body: nil)
        }
        // Consent rescinded after the answer was queued: it is not sent.
        if let rescission { return .refused(error: "refused (HTTP 0): \(rescission.reason)") }
        // One indexed query for this transaction's kept proofs (both ledgers answer it). A
        // ledger that cannot answer leaves the call queued: "no outage" is not assumed.
        let kept: [PendingProof]
        do {
            kept = try await ledger.pendingProofs(keptUnder: call.transactionID, limit: PendingProof.perTransaction)
        } catch {
            return settle(call, .retryLater(reason: "the ledger could not be read: \(error)", after: nil), body: nil)
        }
        let answer = ConsumptionAnswer.build(
            row: row, pendingProof: kept.contains { $0.status == .pending },
            product: row.flatMap { catalog.catalog.product(id: $0.productID) }, refundPreference: refundPreference)
        switch answer {
        case .withhold(let reason):
            return .skipped(reason: "no consumption answer: \(reason)")
        case .notYet(let reason):
            // Apple waits 12 hours for an answer: asked again each minute until 11 have passed.
            guard Date().timeIntervalSince(call.createdAt) < Self.consumptionPatience else {
                return .skipped(reason: "no consumption answer: \(reason), for 11 hours")
            }
            return .retry(error: "not yet: \(reason)", retryAt: Date().addingTimeInterval(60))
        case .send(let information):
            guard information.customerConsented else { return .refused(error: "refused (HTTP 0): no customer consent on record") }
            let body = (try? JSONEncoder.sorted.encode(information)).map { String(decoding: $0, as: UTF8.self) }
            return settle(
                call, await client.sendConsumptionInformation(call.transactionID, environment: call.environment, information), body: body)
        }
    }

    private func settle(_ call: ServerCall, _ outcome: ServerAPICallOutcome, body: String?) -> ServerCallResult {
        switch outcome {
        case .accepted:
            return .sent(body: body)
        case .notFound:
            return .refused(error: "the App Store does not know this transaction in \(call.environment.rawValue) (404)")
        case .refused(let status, let code, let reason):
            return .refused(error: "refused (HTTP \(status)\(code.map { ", \($0)" } ?? "")): \(reason)")
        case .retryLater(let reason, let after):
            guard call.attempts + 1 < Self.maximumAttempts else {
                return .refused(error: "given up after \(Self.maximumAttempts) tries: \(reason)")
            }
            let wait = ServerCall.backoff(afterAttempts: call.attempts + 1, retryAfter: after)
            return .retry(error: reason, retryAt: Date().addingTimeInterval(Double(wait.components.seconds)))
        }
    }

    private func log(_ call: ServerCall, _ result: ServerCallResult) {
        let metadata: Logger.Metadata = ["call": .string(call.kind.rawValue), "transaction": .string(call.transactionID)]
        switch result {
        case .sent: logger.info("App Store Server API call made", metadata: metadata)
        case .retry(let error, let at):
            logger.notice(
                "App Store Server API call deferred",
                metadata: metadata.merging(["error": .string(error), "retryAt": .string(at.ISO8601Format())]) { $1 })
        case .refused(let error):
            logger.warning("App Store Server API call refused", metadata: metadata.merging(["error": .string(error)]) { $1 })
        case .skipped(let reason):
            logger.notice("App Store Server API call not made", metadata: metadata.merging(["reason": .string(reason)]) { $1 })
        }
    }
}

extension JSONEncoder {
    /// Sorted keys: a body recorded for audit reads the same every time.
    static var sorted: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }
}

/// A wake-up signal a sleeping loop waits on with a bound; a signal while it runs is kept (one).
final class WakeUps: Sendable {
    private let stream: AsyncStream<Void>
    private let continuation: AsyncStream<Void>.Continuation

    init() {
        (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
    }

    func signal() { continuation.yield() }

    /// Returns at the next signal (at once if one is pending), or after `limit`; at once when
    /// the waiting task is cancelled. One waiter at a time.
    ///
    /// The timeout is a signal too, sent into the stream. Cancelling a task that awaits an
    /// `AsyncStream`'s `next()` finishes the stream for good: every later wait would return at
    /// once, and the sender's loop would spin on the ledger (it did, a core per server).
    func wait(upTo limit: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [continuation] in
                if (try? await Task.sleep(for: limit)) != nil { continuation.yield() }
            }
            var signals = stream.makeAsyncIterator()
            _ = await signals.next()
            group.cancelAll()
        }
    }
}

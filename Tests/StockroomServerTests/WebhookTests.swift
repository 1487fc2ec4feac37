import AppStoreSimulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// A webhook receiver on loopback: records every request, checks every signature with the
/// secrets it holds, and answers as the test says (accept, an error status, close, hang).
final class WebhookReceiver: @unchecked Sendable {
    enum Mode: Sendable {
        case accept
        case status(Int, retryAfter: String? = nil)
        case redirect(to: String)
        /// Closes the connection without answering.
        case close
        /// Answers only after this long.
        case hang(TimeInterval)
        /// Records the request, waits this long, then answers 200.
        case slowAccept(TimeInterval)
        /// Answers 200 with a body of this many bytes.
        case acceptWithBody(Int)
    }

    /// One request as it arrived, and how it was answered.
    struct Received: Sendable {
        var request: ScriptedHTTPServer.Request
        var answered: Int?
        var eventID: String { request.header("Stockroom-Event-Id") ?? "" }
        var body: [UInt8] { Array(request.body) }
        var json: [String: Any] { (try? JSONSerialization.jsonObject(with: request.body)) as? [String: Any] ?? [:] }
        var isSignatureValid: Bool = false
    }

    private let lock = NSLock()
    private var mode: Mode
    private var log: [Received] = []
    let secrets: [String]
    private(set) var server: ScriptedHTTPServer!

    init(secrets: [String], mode: Mode = .accept, port: Int = 0) throws {
        self.secrets = secrets
        self.mode = mode
        server = try ScriptedHTTPServer(port: port) { [unowned self] request in self.answer(request) }
    }

    var url: String { "http://127.0.0.1:\(server.port)/hooks/stockroom" }

    func set(_ mode: Mode) { lock.withLock { self.mode = mode } }

    /// Every request so far.
    var received: [Received] { lock.withLock { log } }

    /// The requests answered 2xx: what the sender may count as delivered.
    var delivered: [Received] { received.filter { ($0.answered ?? 0) / 100 == 2 } }

    private func answer(_ request: ScriptedHTTPServer.Request) -> [ScriptedHTTPServer.Step] {
        let signature = request.header(WebhookSignature.header) ?? ""
        let valid = WebhookSignature.isValid(signature, body: Array(request.body), secrets: secrets, now: Date())
        let mode = lock.withLock { self.mode }
        let (status, steps): (Int?, [ScriptedHTTPServer.Step])
        switch mode {
        case .accept: (status, steps) = (200, [.send(Self.response(200))])
        case .status(let code, let retryAfter):
            (status, steps) = (code, [.send(Self.response(code, extra: retryAfter.map { "Retry-After: \($0)\r\n" } ?? ""))])
        case .redirect(let location): (status, steps) = (302, [.send(Self.response(302, extra: "Location: \(location)\r\n"))])
        case .close: (status, steps) = (nil, [.close])
        case .hang(let seconds): (status, steps) = (nil, [.pause(seconds), .close])
        case .slowAccept(let seconds): (status, steps) = (200, [.pause(seconds), .send(Self.response(200))])
        case .acceptWithBody(let size):
            let head = "HTTP/1.1 200 X\r\nContent-Length: \(size)\r\n\r\n"
            (status, steps) = (200, [.send(head + String(repeating: "x", count: size))])
        }
        lock.withLock { log.append(Received(request: request, answered: status, isSignatureValid: valid)) }
        return steps
    }

    private static func response(_ status: Int, extra: String = "") -> String {
        "HTTP/1.1 \(status) X\r\nContent-Length: 0\r\n\(extra)\r\n"
    }

    func stop() { server.stop() }
}

/// Webhooks through a live server, the simulator and a real receiver: every event the live routes
/// make arrives signed, in order per transaction, once per ID with one body, whatever the
/// receiver does meanwhile.
@Suite struct WebhookTests {
    static let secret = "whsec_test_secret_0123456789"

    /// The fixture with one endpoint, `receiver`, sending fast (short retries and timeout).
    static func run<Value: Sendable>(
        engine: LedgerEngine = .sqlite, receiver: WebhookReceiver, secrets: [String]? = nil,
        _ configure: @Sendable @escaping (inout ServerConfiguration) -> Void = { _ in },
        _ body: @Sendable @escaping (DownloadFixture) async throws -> Value
    ) async throws -> Value {
        let folder = try TemporaryFolder()
        let endpoints = #"{"endpoints": [{"name": "backend", "url": "\#(receiver.url)", "secrets": \#(Self.json(secrets ?? [secret]))}]}"#
        try folder.write("webhooks.json", endpoints)
        return try await DownloadFixture.run(engine: engine) { configuration in
            configuration.webhooksFile = folder.path + "/webhooks.json"
            configuration.webhookSettings.firstRetry = .milliseconds(100)
            configuration.webhookSettings.longestWait = .milliseconds(400)
            configuration.webhookSettings.timeout = .seconds(2)
            configuration.webhookSettings.interval = .milliseconds(100)
            configure(&configuration)
        } _: { fixture in
            let value = try await body(fixture)
            withExtendedLifetime(folder) {}
            return value
        }
    }

    static func json(_ strings: [String]) -> String {
        String(decoding: try! JSONSerialization.data(withJSONObject: strings), as: UTF8.self)
    }

    /// The event types delivered for `transactionID`, in sequence order, once each.
    static func types(_ receiver: WebhookReceiver, of transactionID: String) -> [String] {
        var seen: [Int: String] = [:]
        for received in receiver.delivered where received.json["transactionId"] as? String == transactionID {
            seen[received.json["sequence"] as? Int ?? 0] = received.json["type"] as? String
        }
        return seen.keys.sorted().compactMap { seen[$0] }
    }

    /// Every request signed, each event ID with one body, each delivered event's sequence numbers
    /// consecutive from 1 per transaction, and each transaction's events received in that order.
    static func checkDeliveries(_ receiver: WebhookReceiver) {
        var bodies: [String: [UInt8]] = [:]
        for received in receiver.received {
            #expect(received.isSignatureValid, "a request's signature did not verify")
            if let earlier = bodies[received.eventID] { #expect(earlier == received.body, "one event ID came with two bodies") }
            bodies[received.eventID] = received.body
        }
        var last: [String: Int] = [:]
        for received in receiver.delivered {
            let transaction = received.json["transactionId"] as? String ?? ""
            let sequence = received.json["sequence"] as? Int ?? 0
            // Out of order only as a repeat of an event already received (at least once).
            #expect(sequence <= (last[transaction] ?? 0) + 1, "event \(sequence) of \(transaction) came before \(last[transaction] ?? 0)+1")
            last[transaction] = max(last[transaction] ?? 0, sequence)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aPurchasesEventsArriveSignedInOrderWithTheLedgersIDs(_ engine: LedgerEngine) async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret])
        defer { receiver.stop() }
        try await Self.run(engine: engine, receiver: receiver, { $0.adminToken = "admin-token-0123456789abcdef0123" }) { fixture in
            let (purchase, token) = try await LifecycleTests.buyAndDownload(fixture)
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)
            let id = purchase.transactionId
            #expect(try await fixture.eventually { Self.types(receiver, of: id).count == 4 })
            let revoke = try await fixture.admin(
                .post, "fulfilments/\(id)/revoke", token: "admin-token-0123456789abcdef0123", body: ["reason": "chargeback"])
            #expect(revoke.status == .ok)
            let reinstate = try await fixture.admin(
                .post, "fulfilments/\(id)/reinstate", token: "admin-token-0123456789abcdef0123", body: ["reason": "resolved"])
            #expect(reinstate.status == .ok)
            #expect(try await fixture.eventually { Self.types(receiver, of: id).count == 6 })
            #expect(
                Self.types(receiver, of: id) == [
                    "purchase.verified", "purchase.delivered", "purchase.acknowledged", "purchase.finished", "purchase.revoked",
                    "purchase.reinstated",
                ])
            Self.checkDeliveries(receiver)
            // What arrived is what the ledger recorded, byte for byte, under the same IDs.
            let events = try await fixture.ledger.events(of: id, limit: 100)
            #expect(events.map(\.sequence) == Array(1...6))
            for event in events {
                let arrived = receiver.delivered.filter { $0.eventID == event.eventID }
                #expect(arrived.count == 1)
                #expect(arrived.first.map { String(decoding: $0.body, as: UTF8.self) } == event.body)
                #expect(arrived.first?.request.header("Stockroom-Event-Type") == event.type.rawValue)
            }
            let body = try #require(receiver.delivered.first { $0.json["type"] as? String == "purchase.revoked" }?.json)
            #expect((body["detail"] as? String)?.contains("chargeback") == true)
            #expect(body["productId"] as? String == DownloadFixture.book)
            #expect(body["originalTransactionId"] as? String == purchase.originalTransactionId)
            #expect(body["environment"] as? String == (try await fixture.ledger.fulfilment(id)?.environment?.rawValue))
            #expect(body["state"] as? String == "revoked")
            // Recorded sent once the answer is in (the receiver saw the request before that).
            let query = WebhookDeliveryQuery(endpoint: "backend", transactionID: id)
            #expect(
                try await fixture.eventually {
                    let deliveries = try await fixture.ledger.webhookDeliveries(query)
                    return deliveries.count == 6 && deliveries.allSatisfy { $0.delivery.status == .sent && $0.delivery.lastStatus == 200 }
                })
        }
    }

    @Test func aRefundAndAConsumptionAnswerAreReported() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret])
        defer { receiver.stop() }
        try await Self.run(receiver: receiver, { $0.finishOn = nil }) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture, consent: true)
            let request = try await LifecycleTests.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": purchase.transactionId])
            #expect(try await LifecycleTests.deliver(fixture, request).status == .ok)
            let id = purchase.transactionId
            #expect(try await fixture.eventually { Self.types(receiver, of: id).count == 3 })
            let refund = try await LifecycleTests.mint(fixture, ["type": "REFUND", "transactionId": id, "revocationType": "REFUND_FULL"])
            #expect(try await LifecycleTests.deliver(fixture, refund).status == .ok)
            #expect(try await fixture.eventually { Self.types(receiver, of: id).count == 4 })
            #expect(
                Self.types(receiver, of: id) == ["purchase.verified", "purchase.delivered", "consumption.answered", "purchase.refunded"])
            Self.checkDeliveries(receiver)
        }
    }

    @Test func aRestoredPurchaseIsReportedRestored() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret])
        defer { receiver.stop() }
        try await Self.run(receiver: receiver) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let response = try await fixture.client.execute(
                uri: "/v1/restores", method: .post,
                body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["signedTransaction": purchase.signedTransaction])))
            #expect(response.status == .ok)
            #expect(try await fixture.eventually { Self.types(receiver, of: purchase.transactionId) == ["purchase.restored"] })
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aReceiverDownForAWhileGetsEveryEventOnceBack(_ engine: LedgerEngine) async throws {
        // Down: nothing listens on its port at first, then it answers by closing, then 503s.
        let port = try StockroomProcess.freePort()
        let url = "http://127.0.0.1:\(port)/hooks/stockroom"
        let placeholder = try WebhookReceiver(secrets: [Self.secret])
        placeholder.stop()
        let folder = try TemporaryFolder()
        try folder.write("webhooks.json", #"{"endpoints": [{"name": "backend", "url": "\#(url)", "secrets": ["\#(Self.secret)"]}]}"#)
        try await DownloadFixture.run(engine: engine) { configuration in
            configuration.webhooksFile = folder.path + "/webhooks.json"
            configuration.webhookSettings.firstRetry = .milliseconds(100)
            configuration.webhookSettings.longestWait = .milliseconds(400)
            configuration.webhookSettings.interval = .milliseconds(100)
        } _: { fixture in
            var ids: [String] = []
            for _ in 0..<3 {
                let (purchase, token) = try await LifecycleTests.buyAndDownload(fixture)
                #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok)
                ids.append(purchase.transactionId)
            }
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(WebhookDeliveryQuery()).contains { $0.delivery.attempts >= 2 }
                })
            let receiver = try WebhookReceiver(secrets: [Self.secret], mode: .close, port: port)
            defer { receiver.stop() }
            #expect(try await fixture.eventually { receiver.received.count >= 2 })
            receiver.set(.status(503, retryAfter: "0"))
            #expect(try await fixture.eventually { receiver.received.contains { $0.answered == 503 } })
            receiver.set(.accept)
            let bought = ids
            #expect(try await fixture.eventually { bought.allSatisfy { Self.types(receiver, of: $0).count == 4 } })
            for id in bought {
                #expect(
                    Self.types(receiver, of: id) == [
                        "purchase.verified", "purchase.delivered", "purchase.acknowledged", "purchase.finished",
                    ])
            }
            Self.checkDeliveries(receiver)
            #expect(
                try await fixture.eventually {
                    let deliveries = try await fixture.ledger.webhookDeliveries(WebhookDeliveryQuery())
                    return deliveries.count == 12 && deliveries.allSatisfy { $0.delivery.status == .sent }
                })
        }
        withExtendedLifetime(folder) {}
    }

    /// Two instances on one PostgreSQL ledger, each with its sender: every event is sent by one of them, once.
    @Test func twoInstancesOnOneLedgerSendEachEventOnce() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret])
        defer { receiver.stop() }
        try await Self.run(engine: .postgres, receiver: receiver, { $0.finishOn = nil }) { fixture in
            // The second instance's sender, on its own pool to the same database.
            let endpoint = WebhookEndpoint(name: "backend", url: receiver.url, secrets: [Self.secret])
            var settings = WebhookSettings()
            settings.interval = .milliseconds(100)
            let other = WebhookSender(ledger: fixture.ledger, endpoints: [endpoint], settings: settings, logger: .init(label: "other"))
            let running = Task { try await other.run() }
            defer { running.cancel() }
            var ids: [String] = []
            for _ in 0..<6 { ids.append(try await LifecycleTests.buyAndDownload(fixture).0.transactionId) }
            let bought = ids
            #expect(try await fixture.eventually { bought.allSatisfy { Self.types(receiver, of: $0).count == 2 } })
            try await Task.sleep(for: .milliseconds(500))
            let perEvent = Dictionary(grouping: receiver.received, by: \.eventID)
            #expect(perEvent.count == 12)
            #expect(perEvent.values.allSatisfy { $0.count == 1 }, "an event was sent twice: \(perEvent.filter { $0.value.count > 1 }.keys)")
            Self.checkDeliveries(receiver)
        }
    }

    @Test func a410ParksAtOnceAndARedirectIsNotFollowed() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret], mode: .status(410))
        defer { receiver.stop() }
        let elsewhere = try WebhookReceiver(secrets: [Self.secret])
        defer { elsewhere.stop() }
        try await Self.run(receiver: receiver, { $0.finishOn = nil }) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let query = WebhookDeliveryQuery(transactionID: purchase.transactionId)
            #expect(try await fixture.eventually { try await fixture.ledger.webhookDeliveries(query).count == 2 })
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(query).allSatisfy { $0.delivery.status == .parked }
                })
            let parked = try await fixture.ledger.webhookDeliveries(query)
            #expect(parked.allSatisfy { $0.delivery.attempts == 1 && $0.delivery.lastStatus == 410 })
            #expect(parked.first?.delivery.lastError?.contains("410") == true)

            // A redirect is a failure, retried; its Location is never asked.
            receiver.set(.redirect(to: elsewhere.url))
            for delivery in parked { #expect(try await fixture.ledger.redeliver(try #require(delivery.delivery.id), now: Date())) }
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(query).contains { ($0.delivery.lastError ?? "").contains("redirect") }
                })
            #expect(elsewhere.received.isEmpty)
            #expect(try await fixture.ledger.webhookDeliveries(query).allSatisfy { $0.delivery.status == .queued })

            // Back to 2xx: the redelivered events arrive, with the IDs and bodies they had.
            receiver.set(.accept)
            #expect(try await fixture.eventually { Self.types(receiver, of: purchase.transactionId).count == 2 })
            Self.checkDeliveries(receiver)
        }
    }

    /// A 500 is retried after the backoff (here 0.1 s doubling to 0.4 s); a 429's `Retry-After`
    /// longer than that is waited for.
    @Test func a500IsRetriedAndARetryAfterIsHonoured() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret], mode: .status(500))
        defer { receiver.stop() }
        try await Self.run(receiver: receiver, { $0.finishOn = nil }) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let query = WebhookDeliveryQuery(transactionID: purchase.transactionId)
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(query).contains {
                        $0.delivery.attempts >= 2 && $0.delivery.lastStatus == 500
                    }
                })
            #expect(try await fixture.ledger.webhookDeliveries(query).allSatisfy { $0.delivery.status == .queued })
            receiver.set(.status(429, retryAfter: "3"))
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(query).contains { $0.delivery.lastStatus == 429 }
                })
            let waiting = try #require(try await fixture.ledger.webhookDeliveries(query).first { $0.delivery.lastStatus == 429 })
            let wait = waiting.delivery.dueAt.timeIntervalSince(waiting.delivery.updatedAt)
            #expect(wait >= 2.9 && wait <= 3.1, "waited \(wait) s, not the receiver's 3 s")
            let asked = receiver.received.count
            try await Task.sleep(for: .seconds(1))
            #expect(receiver.received.count == asked, "asked again before Retry-After")
            receiver.set(.accept)
            #expect(try await fixture.eventually { Self.types(receiver, of: purchase.transactionId).count == 2 })
            Self.checkDeliveries(receiver)
        }
    }

    @Test func aReceiverThatNeverAnswersTimesOutAndIsTriedAgainWithoutHoldingTheOthers() async throws {
        let silent = try WebhookReceiver(secrets: [Self.secret], mode: .hang(30))
        defer { silent.stop() }
        let healthy = try WebhookReceiver(secrets: [Self.secret])
        defer { healthy.stop() }
        let folder = try TemporaryFolder()
        try folder.write(
            "webhooks.json",
            #"""
            {"endpoints": [{"name": "silent", "url": "\#(silent.url)", "secrets": ["\#(Self.secret)"]},
                           {"name": "healthy", "url": "\#(healthy.url)", "secrets": ["\#(Self.secret)"]}]}
            """#)
        try await DownloadFixture.run { configuration in
            configuration.webhooksFile = folder.path + "/webhooks.json"
            configuration.finishOn = nil
            configuration.webhookSettings.firstRetry = .milliseconds(100)
            configuration.webhookSettings.timeout = .seconds(1)
            configuration.webhookSettings.interval = .milliseconds(100)
        } _: { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            // The healthy endpoint hears both events while the silent one holds its first.
            #expect(try await fixture.eventually { Self.types(healthy, of: purchase.transactionId).count == 2 })
            let query = WebhookDeliveryQuery(endpoint: "silent", transactionID: purchase.transactionId)
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.webhookDeliveries(query).contains { ($0.delivery.lastError ?? "").contains("timed out") }
                })
            // In order: the second event waits while the first is not received.
            let silentTypes = silent.received.map { $0.json["type"] as? String }
            #expect(silentTypes.allSatisfy { $0 == "purchase.verified" })
        }
        withExtendedLifetime(folder) {}
    }

    @Test func aRotatedSecretSignsWithBothUntilTheOldIsRemoved() async throws {
        let old = "whsec_old_secret_0123456789"
        let new = "whsec_new_secret_9876543210"
        let oldReceiver = try WebhookReceiver(secrets: [old])
        defer { oldReceiver.stop() }
        try await Self.run(receiver: oldReceiver, secrets: [new, old], { $0.finishOn = nil }) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            #expect(try await fixture.eventually { Self.types(oldReceiver, of: purchase.transactionId).count == 2 })
            Self.checkDeliveries(oldReceiver)
            let signature = try #require(oldReceiver.received.first?.request.header(WebhookSignature.header))
            let body = try #require(oldReceiver.received.first?.body)
            #expect(signature.components(separatedBy: "v1=").count == 3)
            #expect(WebhookSignature.isValid(signature, body: body, secrets: [new], now: Date()))
            #expect(!WebhookSignature.isValid(signature, body: body, secrets: ["whsec_another_secret_000000"], now: Date()))
        }
        // The old secret removed: a receiver still holding only it refuses what arrives.
        let stale = try WebhookReceiver(secrets: [old])
        defer { stale.stop() }
        try await Self.run(receiver: stale, secrets: [new], { $0.finishOn = nil }) { fixture in
            _ = try await LifecycleTests.buyAndDownload(fixture)
            #expect(try await fixture.eventually { stale.received.count >= 1 })
            #expect(stale.received.allSatisfy { !$0.isSignatureValid })
        }
    }

    /// The queue's gauges are counted every second while counting is quick; behind a backlog whose
    /// count takes long, they rest 99 times as long as it took, so counting is 1 % of the time.
    @Test func theQueuesGaugesAreCountedLessOftenBehindALongBacklog() {
        #expect(WebhookSender.gaugesRest(afterCounting: .milliseconds(2)) == .zero)
        #expect(WebhookSender.gaugesRest(afterCounting: .milliseconds(10)) == .zero)
        #expect(WebhookSender.gaugesRest(afterCounting: .milliseconds(500)) == .milliseconds(49_500))
    }

    /// An endpoint given by URL is named by that URL, whatever others come and go; listings show
    /// its scheme, host and port, never its path, query or user information.
    @Test func aURLEndpointKeepsItsNameAndShowsNoCredential() throws {
        let key = Array(ServerFixture.tokenSecret.utf8)
        let a = "https://a.example/hooks?token=abc", b = "https://b.example/T000/B000/secretpath"
        let both = try WebhookEndpoint.resolve(urls: [a, b], file: nil, key: key)
        let alone = try WebhookEndpoint.resolve(urls: [b], file: nil, key: key)
        #expect(both[1].name == alone[0].name)
        #expect(both[1].secrets == alone[0].secrets && both[0].secrets != both[1].secrets)
        #expect(both[0].name.hasPrefix("webhook-") && both[0].name.count == 16)
        #expect(WebhookEndpoint.redacted(a) == "https://a.example/…")
        #expect(WebhookEndpoint.redacted(b) == "https://b.example/…")
        #expect(WebhookEndpoint.redacted("http://user:pw@127.0.0.1:8080") == "http://127.0.0.1:8080/")
        #expect(try WebhookEndpoint(name: "x", url: "http://127.0.0.1:9/h", secrets: [Self.secret]).validated().name == "x")
    }

    @Test func aSignatureIsRefusedForATamperedBodyAStaleTimeOrAnotherSecret() {
        let body = Array(#"{"id":"e1","type":"purchase.delivered"}"#.utf8)
        let now = Date()
        let header = WebhookSignature.value(body: body, time: now, secrets: [Self.secret])
        #expect(WebhookSignature.isValid(header, body: body, secrets: [Self.secret], now: now))
        #expect(!WebhookSignature.isValid(header, body: body + [0x20], secrets: [Self.secret], now: now))
        #expect(!WebhookSignature.isValid(header, body: body, secrets: [Self.secret], now: now + 301))
        #expect(!WebhookSignature.isValid(header, body: body, secrets: ["whsec_another_secret_000000"], now: now))
        #expect(!WebhookSignature.isValid("v1=00", body: body, secrets: [Self.secret], now: now))
    }

    /// The README's code block that starts with `marker`.
    static func readmeBlock(_ marker: String) throws -> String {
        let readme = try String(contentsOfFile: #filePath.components(separatedBy: "/Tests/")[0] + "/README.md", encoding: .utf8)
        let start = try #require(readme.range(of: marker))
        let end = try #require(readme.range(of: "\n```", range: start.upperBound..<readme.endIndex))
        return String(readme[start.lowerBound..<end.lowerBound]) + "\n"
    }

    /// The README's Python and JavaScript verifiers, run on a real delivery: it verifies; a body
    /// with one byte changed, a time six minutes old and another secret do not.
    @Test func theReadmesVerifiersAcceptARealDeliveryAndRefuseATamperedOne() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret])
        defer { receiver.stop() }
        let delivery = try await Self.run(receiver: receiver, { $0.finishOn = nil }) { fixture in
            _ = try await LifecycleTests.buyAndDownload(fixture)
            #expect(try await fixture.eventually { !receiver.delivered.isEmpty })
            return try #require(receiver.delivered.first)
        }
        let header = try #require(delivery.request.header(WebhookSignature.header))
        var tampered = delivery.body
        tampered[tampered.count / 2] ^= 0x01
        let stale = WebhookSignature.value(body: delivery.body, time: Date().addingTimeInterval(-360), secrets: [Self.secret])
        // Each case: a header, the body in hex, the secrets; the verifier prints one line per case.
        let cases: [(String, [UInt8], [String], Bool)] = [
            (header, delivery.body, [Self.secret], true), (header, tampered, [Self.secret], false),
            (stale, delivery.body, [Self.secret], false), (header, delivery.body, ["whsec_another_secret_000000"], false),
            (header, delivery.body, ["whsec_another_secret_000000", Self.secret], true),
        ]
        let json = String(
            decoding: try JSONSerialization.data(
                withJSONObject: cases.map { [$0.0, ByteEncoding.hex($0.1), $0.2] as [Any] }), as: UTF8.self)
        let expected = cases.map { $0.3 ? "true" : "false" }.joined(separator: "\n")
        let folder = try TemporaryFolder()
        try folder.write(
            "verify.py",
            try Self.readmeBlock("# verify a Stockroom webhook (Python)") + """
                import json, sys
                for header, body, secrets in json.loads(sys.argv[1]):
                    print("true" if verify(header, bytes.fromhex(body), secrets) else "false")
                """)
        try folder.write(
            "verify.js",
            try Self.readmeBlock("// verify a Stockroom webhook (JavaScript") + """
                for (const [header, body, secrets] of JSON.parse(process.argv[2])) {
                  console.log(verify(header, Buffer.from(body, "hex"), secrets) ? "true" : "false");
                }
                """)
        for (tool, file) in [
            ("/usr/bin/env", ["python3", folder.path + "/verify.py"]), ("/usr/bin/env", ["node", folder.path + "/verify.js"]),
        ] {
            let (status, output) = try await ChildProcess.run(tool, file + [json])
            #expect(status == 0, "\(file[0]): \(output)")
            #expect(output.trimmingCharacters(in: .whitespacesAndNewlines) == expected, "\(file[0])")
        }
    }

    /// `/v1/admin/webhooks`: the endpoints without their secrets or their URL's query, the
    /// deliveries by status, and redelivery of a parked one; bad input is a 400 and changes nothing.
    @Test func theAdminAPIListsEndpointsAndDeliveriesAndRedeliversAParkedOne() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret], mode: .status(410))
        defer { receiver.stop() }
        let token = "admin-token-0123456789abcdef0123"
        try await Self.run(
            receiver: receiver,
            {
                $0.adminToken = token; $0.finishOn = nil
            }
        ) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let id = purchase.transactionId
            let parked = WebhookDeliveryQuery(status: .parked)
            #expect(try await fixture.eventually { try await fixture.ledger.webhookDeliveries(parked).count == 2 })

            let endpoints = try DownloadFixture.json(try await fixture.admin(.get, "webhooks", token: token))
            let listed = try #require((endpoints["endpoints"] as? [[String: Any]])?.first)
            #expect(listed["name"] as? String == "backend")
            #expect(listed["parked"] as? Int == 2)
            #expect(listed["secrets"] == nil)
            #expect(String(describing: endpoints).contains(Self.secret) == false)

            let list = try DownloadFixture.json(
                try await fixture.admin(.get, "webhooks/deliveries?status=parked&transaction=\(id)", token: token))
            let deliveries = try #require(list["deliveries"] as? [[String: Any]])
            #expect(deliveries.map { $0["type"] as? String } == ["purchase.delivered", "purchase.verified"])
            #expect(deliveries.allSatisfy { $0["lastStatus"] as? Int == 410 && $0["status"] as? String == "parked" })

            let before = try await fixture.ledger.webhookDeliveries(WebhookDeliveryQuery())
            for (path, status) in [
                ("webhooks/deliveries?status=lost", 400), ("webhooks/deliveries?limit=0", 400),
                ("webhooks/deliveries?transaction=a%20b", 400),
            ] {
                #expect(try await fixture.admin(.get, path, token: token).status.code == status, "\(path)")
            }
            for (path, status) in [("webhooks/deliveries/abc/redeliver", 400), ("webhooks/deliveries/999999/redeliver", 404)] {
                let response = try await fixture.admin(.post, path, token: token)
                #expect(response.status.code == status, "\(path)")
            }
            #expect(try await fixture.ledger.webhookDeliveries(WebhookDeliveryQuery()) == before)

            receiver.set(.accept)
            let first = try #require(deliveries.last?["id"] as? Int)
            let redelivered = try DownloadFixture.json(
                try await fixture.admin(.post, "webhooks/deliveries/\(first)/redeliver", token: token))
            #expect(redelivered["redelivered"] as? Int == first)
            #expect(try await fixture.eventually { Self.types(receiver, of: id) == ["purchase.verified"] })
        }
    }

    /// `/console/webhooks`: the endpoint's queue and its deliveries, a parked one redelivered by
    /// its form (with the session's CSRF token; without it, 403 and nothing changes).
    @Test func theConsoleShowsAnEndpointsDeliveriesAndRedeliversAParkedOne() async throws {
        let receiver = try WebhookReceiver(secrets: [Self.secret], mode: .status(410))
        defer { receiver.stop() }
        let token = "admin-token-0123456789abcdef0123"
        try await Self.run(
            receiver: receiver,
            {
                $0.adminToken = token; $0.finishOn = nil
            }
        ) { fixture in
            let (purchase, _) = try await LifecycleTests.buyAndDownload(fixture)
            let parked = WebhookDeliveryQuery(status: .parked)
            #expect(try await fixture.eventually { try await fixture.ledger.webhookDeliveries(parked).count == 2 })
            var browser = ConsoleClient(fixture.client)
            #expect(try await browser.signIn(token: token).status == .seeOther)
            let page = String(buffer: try await browser.get("/console/webhooks").body)
            #expect(page.contains("data-endpoint=\"backend\""))
            #expect(page.contains("data-parked=\"2\""))
            #expect(page.contains(purchase.transactionId))
            #expect(!page.contains(Self.secret))
            #expect(page.components(separatedBy: "Redeliver</button>").count == 3)
            let id = try #require(try await fixture.ledger.webhookDeliveries(parked).last?.delivery.id)
            let path = "/console/webhooks/deliveries/\(id)/redeliver"
            #expect(try await browser.post(path, form: ["csrf": "0000"]).status == .forbidden)
            #expect(try await fixture.ledger.webhookDeliveries(parked).count == 2)
            #expect(try await browser.get("/console/webhooks?status=lost").status == .badRequest)
            receiver.set(.accept)
            let posted = try await browser.post(path, form: ["csrf": try await browser.csrfToken(on: "/console/webhooks")])
            #expect(posted.status == .seeOther)
            #expect(try await fixture.eventually { Self.types(receiver, of: purchase.transactionId) == ["purchase.verified"] })
            // The transaction's page lists its events.
            let detail = String(buffer: try await browser.get("/console/fulfilments/\(purchase.transactionId)").body)
            #expect(detail.contains("data-event=\"purchase.verified\"") && detail.contains("data-event=\"purchase.delivered\""))
            let missing = try await browser.post(
                "/console/webhooks/deliveries/999999/redeliver", form: ["csrf": try await browser.csrfToken(on: "/console/webhooks")])
            #expect(missing.status == .notFound)
        }
    }

    @Test func anEndpointThatCannotBeUsedRefusesStartUp() async throws {
        for (url, expected) in [
            ("http://example.com/hook", "https"), ("ftp://127.0.0.1/x", "https"), ("https://user:pw@example.com/", "absolute"),
            ("not a url", "absolute"), ("http://127.attacker.example/hook", "https"), ("http://127.0.0.1.example/", "https"),
        ] {
            var fixture = try ServerFixture()
            fixture.configuration.webhookURLs = [url]
            do {
                _ = try await fixture.application()
                Issue.record("\(url) was accepted")
            } catch let error as StartupError {
                #expect(error.description.contains(expected), "\(url): \(error)")
                #expect(!error.description.contains("pw@"))
            }
        }
    }
}

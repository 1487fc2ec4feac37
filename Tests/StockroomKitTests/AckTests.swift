import Foundation
import Hummingbird
import HTTPTypes
import HummingbirdTesting
import StockroomCore
import StockroomKit
import StockroomTestSupport
import Synchronization
import Testing

/// An HTTP proxy on loopback in front of the live server that answers the first `refusals`
/// acknowledgements itself with the server's 409 `not_delivered` (the answer to an ack that
/// arrives before the server recorded the delivery), and forwards everything else with libcurl.
struct AckGate {
    final class Log: Sendable {
        let lines = Mutex<[String]>([])
    }

    let url: URL
    private let log: Log

    /// How many acknowledgements reached the gate, and the requests it forwarded (`METHOD path`).
    var acks: Int { log.lines.withLock { $0.filter { $0.hasSuffix("/ack") }.count } }

    static func run<Value: Sendable>(
        forwardingTo server: URL, refusals: Int, _ body: @Sendable @escaping (AckGate) async throws -> Value
    ) async throws -> Value {
        let log = Log()
        let refused = Mutex(0)
        let client = CurlHTTPClient()
        let router = Router()
        let forward: @Sendable (Request, BasicRequestContext) async throws -> Response = { request, _ in
            let path = request.uri.path
            log.lines.withLock { $0.append(path.hasSuffix("/ack") ? path : "\(request.method.rawValue) \(path)") }
            if path.hasSuffix("/ack"),
                refused.withLock({ count in
                    defer { count += 1 }
                    return count < refusals
                })
            {
                return Response(
                    status: .conflict, headers: [.contentType: "application/json"],
                    body: .init(
                        byteBuffer: ByteBuffer(
                            string: #"{"error": {"code": "not_delivered", "message": "The delivery is not recorded yet."}}"#)))
            }
            let bytes = try await request.body.collect(upTo: 1 << 20)
            let skipped: Set<String> = ["host", "connection", "content-length", "expect", "transfer-encoding", "accept-encoding"]
            let headers = request.headers.filter { !skipped.contains($0.name.canonicalName) }.map {
                (name: $0.name.rawName, value: $0.value)
            }
            let answer = try await client.send(
                UpstreamRequest(
                    method: UpstreamRequest.Method(rawValue: request.method.rawValue) ?? .get,
                    url: server.absoluteString + request.uri.description,
                    headers: headers, body: bytes.readableBytes > 0 || request.method == .post ? Array(buffer: bytes) : nil))
            var fields = HTTPFields()
            for (name, value) in answer.headers where !["connection", "content-length", "transfer-encoding"].contains(name) {
                if let field = HTTPField.Name(name) { fields[field] = value }
            }
            return Response(status: .init(code: answer.status), headers: fields, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
        }
        router.get("**", use: forward)
        router.post("**", use: forward)
        let application = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        return try await application.test(.live) { gateClient in
            let gate = AckGate(url: URL(string: "http://127.0.0.1:\(try #require(gateClient.port))")!, log: log)
            return try await body(gate)
        }
    }
}

/// The acknowledgement's one race: the server records a delivery just after the body went out,
/// so an ack can arrive first and meet 409 `not_delivered`. It is asked again; safe-to-finish is
/// reported only after a 200, and never while the server has not recorded the delivery.
@Suite struct AckTests {
    @Test func anAckMetBeforeTheDeliveryIsRecordedIsAskedAgainAndReportedOnceAfterIts200() async throws {
        try await KitFixture.run { fixture in
            try await AckGate.run(forwardingTo: fixture.direct, refusals: 3) { gate in
                let purchase = try await fixture.control.purchase(KitFixture.book).withReceipt()
                let events = EventLog()
                let delivery = try fixture.delivery(server: gate.url, events: events)
                let reports = Reports()
                reports.listen(delivery)
                let outcome = await delivery.deliver(purchase)
                #expect(outcome == .delivered(file: URL(fileURLWithPath: fixture.file(KitFixture.book))), "\(events.all)")
                #expect(events.requests == ["POST 200", "ack 409", "ack 409", "ack 409", "ack 200"])
                #expect(gate.acks == 4)
                #expect(try await fixture.state(purchase.transactionID) == .acknowledged)
                #expect(await reports.ids() == [purchase.transactionID], "reported once, after the 200")
                let intact = fixture.holds(KitFixture.book, KitFixture.bookBytes)
                #expect(intact)
            }
        }
    }

    @Test func anAckNeverMatchedIsRetriedLaterAndNeverReportedSafeToFinish() async throws {
        try await KitFixture.run { fixture in
            try await AckGate.run(forwardingTo: fixture.direct, refusals: .max) { gate in
                let purchase = try await fixture.control.purchase(KitFixture.book).withReceipt()
                let events = EventLog()
                let delivery = try fixture.delivery(server: gate.url, events: events)
                let reports = Reports()
                reports.listen(delivery)
                let outcome = await delivery.deliver(purchase)
                #expect(outcome.code == "not_delivered", "\(outcome)")
                #expect(outcome.transactionAction == .keepUnfinishedAndRetry, "the StoreKit transaction stays unfinished")
                #expect(gate.acks == 21, "asked 21 times, then left for later")
                // After the tenth, the app asks which bytes the server recorded as sent (all of them
                // here: the gate refuses, not the ledger), and fetches none again.
                #expect(events.requests.filter { $0.hasPrefix("GET") } == ["GET 200"], "\(events.requests)")
                #expect(try await fixture.state(purchase.transactionID) == .delivered, "the server's side: delivered, not acknowledged")
                #expect(await reports.ids().isEmpty, "never reported safe to finish")
            }
        }
    }
}

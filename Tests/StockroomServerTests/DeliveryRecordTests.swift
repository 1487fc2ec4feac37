import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// What the ledger says of a delivery is what happened: `delivered` only once every byte went
/// out, and a consumption answer only where the record supports it. Each case is a buyer's move
/// that made Stockroom say something false, through the live routes.
@Suite struct DeliveryRecordTests {
    static let size = Int64(128 << 20)

    /// Sends `POST /v1/downloads` for the huge product and breaks off after 256 KiB, as a buyer
    /// who drops the connection after the head does; returns once the attempt is recorded.
    static func cutDownload(_ fixture: DownloadFixture, _ purchase: SimulatorControl.Purchase, consent: Bool = true) async throws {
        let body = try JSONSerialization.data(withJSONObject: [
            "productId": AttackLimitTests.huge, "signedTransaction": purchase.signedTransaction, "consent": consent,
        ])
        let impatient = CurlHTTPClient(configuration: .init(maximumResponseBytes: 256 * 1024))
        _ = try? await impatient.send(
            UpstreamRequest(method: .post, url: "http://127.0.0.1:\(fixture.client.port!)/v1/downloads", body: Array(body)))
        #expect(try await fixture.eventually { try await !fixture.ledger.attempts(of: purchase.transactionId).isEmpty })
        let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
        try #require(row.state == .verified && row.bytesDelivered < size, "the first download was cut")
    }

    /// Fetches `range` of the purchase's content with its token, reading and dropping the bytes;
    /// returns the status and how many bytes came.
    static func fetch(
        _ fixture: DownloadFixture, _ transactionID: String, product: String = AttackLimitTests.huge, range: String
    ) async throws -> (status: Int, bytes: Int) {
        let counted = Counted()
        let response = try await CurlHTTPClient().send(
            UpstreamRequest(
                method: .get, url: "http://127.0.0.1:\(fixture.client.port!)/v1/downloads/\(transactionID)/content",
                headers: [
                    ("Authorization", "Bearer \(DownloadFixture.token(transactionID, product: product))"), ("Range", range),
                ],
                bodySink: { _, chunk in
                    counted.add(chunk.count)
                    return true
                }))
        return (response.status, counted.total)
    }

    /// Sends Apple's refund request for `transactionID` and waits until its call is settled.
    static func refundRequest(_ fixture: DownloadFixture, _ transactionID: String) async throws -> ServerCall {
        let request = try await LifecycleTests.mint(fixture, ["type": "CONSUMPTION_REQUEST", "transactionId": transactionID])
        #expect(try await LifecycleTests.deliver(fixture, request).status == .ok)
        #expect(
            try await LifecycleTests.eventually {
                try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption, transactionID: transactionID)).first?.status
                    != .queued
            })
        return try #require(
            try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .consumption, transactionID: transactionID)).first)
    }

    static func adminDetail(_ fixture: DownloadFixture, _ transactionID: String) async throws -> [String: Any] {
        let response = try await fixture.admin(.get, "fulfilments/\(transactionID)", token: AdminTests.token)
        #expect(response.status == .ok)
        return try DownloadFixture.json(response)
    }

    static func withHugeProductAndAdmin(_ configuration: inout ServerConfiguration) {
        AttackLimitTests.withHugeProduct(&configuration)
        configuration.adminToken = AdminTests.token
    }

    // MARK: All but one byte, then a refund

    /// The buyer drops the first download after its head, then fetches every byte but the last
    /// (a PDF's last byte is guessable) and asks Apple for a refund. Stockroom's side never
    /// failed, and most bytes went out: the ledger cannot tell, so Apple is told nothing (it was
    /// told UNDELIVERED_SERVER_OUTAGE, 0 %), the call is recorded skipped with why, and the
    /// purchase is not delivered.
    @Test(arguments: LedgerEngine.allCases) func allButOneByteThenARefundRequestIsNotAnswered(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine, Self.withHugeProductAndAdmin) { fixture in
            let purchase = try await fixture.control.purchase(AttackLimitTests.huge)
            try await Self.cutDownload(fixture, purchase)
            let most = try await Self.fetch(fixture, purchase.transactionId, range: "bytes=0-\(Self.size - 2)")
            #expect(most.status == 206)
            #expect(most.bytes == Int(Self.size - 1))
            #expect(
                try await fixture.eventually {
                    try await fixture.ledger.fulfilment(purchase.transactionId)?.sentBytes?.description == "0-\(Self.size - 2)"
                })

            let call = try await Self.refundRequest(fixture, purchase.transactionId)
            #expect(call.status == .skipped)
            #expect(call.lastError?.contains("\(Self.size - 1) of \(Self.size) bytes went out") == true, "\(call.lastError ?? "")")
            #expect(try await LifecycleTests.apple(fixture, purchase.transactionId)["consumptionAnswers"] as? Int == 0)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified)
            #expect(row.deliveredAt == nil)
            #expect(row.lastDeliveryEnding == .complete)

            // The operator sees it: the admin API's detail names the call, its reason and the bytes.
            let detail = try await Self.adminDetail(fixture, purchase.transactionId)
            #expect(detail["sentBytes"] as? String == "0-\(Self.size - 2)")
            let calls = try #require(detail["serverCalls"] as? [[String: Any]])
            #expect(calls.first?["status"] as? String == "skipped")
            #expect((calls.first?["lastError"] as? String)?.contains("cannot tell") == true)
            // So does the console's page of the transaction.
            var console = ConsoleClient(fixture.client)
            _ = try await console.signIn(token: AdminTests.token)
            let page = try await console.get("/console/fulfilments/\(purchase.transactionId)")
            #expect(String(buffer: page.body).contains("data-status=\"skipped\""))
            #expect(String(buffer: page.body).contains("bytes went out"))
        }
    }

    // MARK: A cut download and the last byte

    /// A cut download followed by `Range: bytes=-1` reaches the file's end, but most of the file
    /// never went out: not delivered (it was, and `--finish-on delivered` finished it with Apple).
    /// The resume from where the cut left off completes it.
    @Test(arguments: LedgerEngine.allCases) func aCutDownloadAndItsLastByteAreNotDelivered(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(
            engine: engine,
            {
                Self.withHugeProductAndAdmin(&$0); $0.finishOn = .delivered
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(AttackLimitTests.huge)
            try await Self.cutDownload(fixture, purchase)
            #expect(try await Self.fetch(fixture, purchase.transactionId, range: "bytes=-1") == (206, 1))
            #expect(
                try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 2 },
                "the last byte's attempt is recorded")
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified)
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .finish)).isEmpty, "nothing finished with Apple")

            let sent = try #require(row.sentBytes?.ranges.first).upperBound
            #expect(try await Self.fetch(fixture, purchase.transactionId, range: "bytes=\(sent + 1)-").status == 206)
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.sentBytes?.description == "0-\(Self.size - 1)")
        }
    }

    // MARK: Stockroom's own failure

    /// The store cannot be reached when an entitled buyer asks for the content: Stockroom's own
    /// failure stopped the delivery, and that is what Apple is told (UNDELIVERED_SERVER_OUTAGE,
    /// 0 %). Once the store is back the whole file goes out, and the answer would be DELIVERED.
    @Test(arguments: LedgerEngine.allCases) func aStoreOutageThatStopsADeliveryIsAnsweredAsOurOutage(_ engine: LedgerEngine)
        async throws
    {
        let bucket = try await ObjectStorageAttackTests.bucket()
        let port = try #require(URL(string: bucket.store.endpoint)?.port)
        let proxy = try TCPProxy(upstreamPort: port)
        defer { proxy.stop() }
        try await DownloadFixture.run(
            engine: engine,
            { configuration in
                ObjectStorageAttackTests.configure(&configuration, bucket, delivery: .stream)
                configuration.objectStore = try? ObjectStoreSettings(
                    endpoint: "http://127.0.0.1:\(proxy.port)", region: "us-east-1", credentials: bucket.store.credentials)
            }
        ) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let charge = try await LifecycleTests.mint(fixture, ["type": "ONE_TIME_CHARGE", "transactionId": purchase.transactionId])
            #expect(try await LifecycleTests.deliver(fixture, charge).status == .ok)
            try await fixture.ledger.recordConsent(purchase.transactionId, consented: true, now: Date())
            // The HEAD a resume makes first may be shared for 250 ms: wait it out.
            proxy.refuse(true)
            proxy.cutAll()
            try await Task.sleep(for: .milliseconds(600))
            let token = DownloadFixture.token(purchase.transactionId)
            let refused = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            #expect(refused.status == .serviceUnavailable)
            #expect(try DownloadFixture.code(refused) == "content_unavailable")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.lastDeliveryEnding == .server)

            #expect(try await Self.refundRequest(fixture, purchase.transactionId).status == .sent)
            let answer = try #require(try await LifecycleTests.apple(fixture, purchase.transactionId)["consumption"] as? [String: Any])
            #expect(answer["deliveryStatus"] as? String == "UNDELIVERED_SERVER_OUTAGE")
            #expect(answer["consumptionPercentage"] as? Int == 0)

            proxy.refuse(false)
            try await Task.sleep(for: .milliseconds(600))
            let whole = try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token)
            #expect(whole.status == .ok)
            #expect(Array(buffer: whole.body) == ServerFixture.book)
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.lastDeliveryEnding == .complete)
            guard case .send(let now) = ConsumptionAnswer.build(row: row, pendingProof: false, product: nil, refundPreference: nil) else {
                Issue.record("a delivered purchase is answered")
                return
            }
            #expect(now.deliveryStatus == .delivered)
        }
    }

    // MARK: Nothing went out

    /// A purchase entitled before the app asked (ONE_TIME_CHARGE) and never downloaded: no byte
    /// went out, so UNDELIVERED_OTHER, 0 %.
    @Test(arguments: LedgerEngine.allCases) func aPurchaseWhoseBytesNeverWentOutIsAnsweredUndelivered(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let charge = try await LifecycleTests.mint(fixture, ["type": "ONE_TIME_CHARGE", "transactionId": purchase.transactionId])
            #expect(try await LifecycleTests.deliver(fixture, charge).status == .ok)
            try await fixture.ledger.recordConsent(purchase.transactionId, consented: true, now: Date())
            #expect(try await Self.refundRequest(fixture, purchase.transactionId).status == .sent)
            let answer = try #require(try await LifecycleTests.apple(fixture, purchase.transactionId)["consumption"] as? [String: Any])
            #expect(answer["deliveryStatus"] as? String == "UNDELIVERED_OTHER")
            #expect(answer["consumptionPercentage"] as? Int == 0)
        }
    }
}

/// Bytes counted from a libcurl callback.
private final class Counted: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0

    func add(_ bytes: Int) { lock.withLock { count += bytes } }
    var total: Int { lock.withLock { count } }
}

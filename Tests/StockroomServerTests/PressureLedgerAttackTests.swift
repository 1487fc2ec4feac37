import AppStoreSimulator
import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomEntitlement
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// Issue 17 cases 3, 4 and 6, tried as a hostile client would through a live server, the real
/// simulator and a real ledger on both engines: the refusal, the honest buyer served meanwhile,
/// and the ledger unchanged (or within its bounds).
@Suite struct PressureLedgerAttackTests {
    static let book = DownloadFixture.book
    static let big = "com.example.big"
    static let adminToken = "admin-token-0123456789abcdef-0123456789"
    static let owner = "8f2e6a4c-0000-4000-8000-000000000017"

    /// An iOS 6 transaction receipt anyone can write: any `signature`, a made-up transaction ID,
    /// and `padding` bytes of filler to make it large.
    static func forgedTransactionReceipt(_ transactionID: String, padding: Int = 0) -> String {
        var info: [(String, String)] = [
            ("transaction-id", transactionID), ("original-transaction-id", transactionID), ("product-id", book),
            ("bid", "com.example.stockroom.demo"), ("purchase-date-ms", "1790000000000"), ("quantity", "1"),
        ]
        if padding > 0 { info.append(("filler", String(repeating: "A", count: padding))) }
        let outer = TransactionReceipt.write([
            ("signature", ByteEncoding.base64(Array(repeating: 7, count: 128))),
            ("purchase-info", ByteEncoding.base64(TransactionReceipt.write(info))), ("pod", "100"), ("signing-status", "0"),
        ])
        return ByteEncoding.base64(outer)
    }

    static func withAdmin(_ configuration: inout ServerConfiguration) {
        configuration.adminToken = adminToken
    }

    /// Calls the simulator received at `endpoint` (`verifyReceipt`, `inApps`, `history`), every environment.
    static func calls(_ fixture: DownloadFixture, _ endpoint: String) async throws -> Int {
        let response = try await fixture.control.client.execute(uri: "/sim/stats", method: .get)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        let endpoints = object?["endpoints"] as? [String: [String: Int]]
        return (endpoints?[endpoint] ?? [:]).values.reduce(0, +)
    }

    static func pendingCount(_ fixture: DownloadFixture) async throws -> Int {
        try await fixture.ledger.pendingProofs(status: nil, limit: 100_000).count
    }

    // MARK: 3. Pending proofs are bounded everywhere

    @Test(arguments: LedgerEngine.allCases) func forgedTransactionReceiptsDuringAnOutageStayWithinTheClientsShare(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(
            engine: engine,
            {
                $0.maxPendingProofsPerClient = 5; $0.maxPendingProofSize = 16 * 1024
            }
        ) { fixture in
            let honest = try await fixture.control.purchase(Self.book)
            #expect(try await fixture.post(honest).status == .ok)
            let before = try await fixture.settledSnapshot()
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])

            // Forty forged receipts, each naming its own made-up transaction, some of them huge.
            for index in 0..<40 {
                let id = String(2_100_000_000_000_000 + index)
                let receipt = Self.forgedTransactionReceipt(id, padding: index.isMultiple(of: 4) ? 100_000 : 0)
                let response = try await fixture.post(["productId": Self.book, "transactionId": id, "receiptData": receipt])
                #expect(response.status == .serviceUnavailable, "\(index): \(String(buffer: response.body))")
                #expect(try DownloadFixture.code(response) == "upstream_unavailable")
            }
            let kept = try await fixture.ledger.pendingProofs(status: nil, limit: 1000)
            #expect(kept.count == 5, "one client keeps at most its share, whatever it sends")
            #expect(kept.allSatisfy { $0.proof.utf8.count <= 16 * 1024 }, "no proof past the size bound is kept")
            #expect(kept.allSatisfy { $0.client == "127.0.0.1" })
            #expect(try await fixture.snapshot() == before, "no forged receipt is an entitlement")

            // The honest buyer, with the proof on record, is served through the outage.
            let served = try await fixture.post(honest)
            #expect(served.status == .ok)
            #expect(Array(buffer: served.body) == ServerFixture.book)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aFloodOfMadeUpTransactionsStopsAtTheGlobalCap(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(
            engine: engine,
            {
                $0.maxPendingProofs = 3; $0.maxPendingProofsPerClient = 100
            }
        ) { fixture in
            let honest = try await fixture.control.purchase(Self.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            for index in 0..<12 {
                let id = String(2_300_000_000_000_000 + index)
                let response = try await fixture.post([
                    "productId": Self.book, "transactionId": id, "receiptData": Self.forgedTransactionReceipt(id),
                ])
                #expect(response.status == .serviceUnavailable)
            }
            #expect(try await Self.pendingCount(fixture) == 3, "the ledger keeps at most --max-pending-proofs, whoever sends them")
            // Past the cap an honest buyer's proof is not kept either: they retry once the App Store is back, and are served.
            #expect(try await fixture.post(honest).status == .serviceUnavailable)
            #expect(try await Self.pendingCount(fixture) == 3)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(try await fixture.post(honest).status == .ok)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aGenuineReceiptNamingMadeUpTransactionsKeepsNothing(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let genuine = try await fixture.control.purchase(Self.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            for index in 0..<30 {
                let response = try await fixture.post([
                    "productId": Self.book, "transactionId": String(2_200_000_000_000_000 + index), "receiptData": genuine.receiptData,
                ])
                #expect(response.status == .serviceUnavailable)
            }
            #expect(try await Self.pendingCount(fixture) == 0, "a receipt is kept only under a transaction it claims")
            // Its own transaction is kept, once.
            #expect(try await fixture.post(genuine).status == .serviceUnavailable)
            let kept = try await fixture.ledger.pendingProofs(status: nil, limit: 100)
            #expect(kept.map(\.transactionID) == [genuine.transactionId])
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func refulfilmentSendsEachDistinctReceiptOnceAndRunsAsAPollableJob(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine, Self.withAdmin) { fixture in
            // Six purchases on one device: the last receipt claims all six.
            var purchases: [SimulatorControl.Purchase] = []
            for _ in 0..<6 {
                purchases.append(try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-pressure"]))
            }
            let receipt = try #require(purchases.last).receiptData
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            for purchase in purchases {
                let response = try await fixture.post([
                    "productId": Self.book, "transactionId": purchase.transactionId, "receiptData": receipt,
                ])
                #expect(response.status == .serviceUnavailable)
            }
            #expect(try await fixture.ledger.pendingProofs(status: .pending, limit: 100).count == 6)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)

            // Apple answers slowly: the request still returns at once, and a second one names the running job.
            try await fixture.control.fault(["kind": "delay", "delayMs": 1500, "count": 1])
            let before = try await Self.calls(fixture, "verifyReceipt")
            let clock = ContinuousClock()
            let started = clock.now
            let post = try await fixture.admin(.post, "pending-proofs/refulfil", token: Self.adminToken)
            #expect(clock.now - started < .milliseconds(1000), "the request does not wait for the batch")
            #expect(post.status == .accepted)
            let job = try DownloadFixture.json(post)
            let id = try #require(job["id"] as? String)
            #expect(["queued", "running"].contains(job["state"] as? String ?? ""))
            let second = try await fixture.admin(.post, "pending-proofs/refulfil", token: Self.adminToken)
            #expect(second.status == .conflict)
            #expect(try DownloadFixture.code(second) == "job_running")
            #expect((try DownloadFixture.json(second)["error"] as? [String: Any])?["jobId"] as? String == id)

            let done = try await fixture.finishedJob(id, token: Self.adminToken)
            #expect(done["state"] as? String == "done")
            #expect(done["total"] as? Int == 6 && done["done"] as? Int == 6)
            #expect((done["counts"] as? [String: Int])?["verified"] == 6)
            #expect(try await Self.calls(fixture, "verifyReceipt") - before == 1, "six rows, one receipt, one verifyReceipt call")
            for purchase in purchases { #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified) }
            let unknown = try await fixture.admin(.get, "jobs/no-such-job", token: Self.adminToken)
            #expect(unknown.status == .notFound)
            #expect(try DownloadFixture.code(unknown) == "not_found")
            // The honest buyers download.
            #expect(try await fixture.post(purchases[0]).status == .ok)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func refulfillingOneTransactionVerifiesThePendingProofsKeptUnderIt(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine, Self.withAdmin) { fixture in
            let purchase = try await fixture.control.purchase(Self.book)
            let other = try await fixture.control.purchase(Self.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            #expect(try await fixture.post(purchase).status == .serviceUnavailable)
            #expect(try await fixture.post(other).status == .serviceUnavailable)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(
                try await fixture.ledger.fulfilment(purchase.transactionId) == nil,
                "only a pending proof, as `fulfilments list --state pending` shows")

            // The admin API (and the console form, and `stockroom refulfil ID`, through the same Entitlements call).
            let refulfil = try await fixture.admin(.post, "fulfilments/\(purchase.transactionId)/refulfil", token: Self.adminToken)
            #expect(refulfil.status == .ok)
            #expect(try DownloadFixture.json(refulfil)["outcome"] as? String == "verified")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            #expect(try await fixture.ledger.fulfilment(other.transactionId) == nil, "only the named transaction's proofs")
            #expect(try await fixture.ledger.pendingProofs(status: .pending, limit: 10).map(\.transactionID) == [other.transactionId])

            // In-process, as `stockroom refulfil ID` runs it.
            let outcome = try await RefulfilPendingRaceTests.operatorRun(fixture).refulfil(other.transactionId)
            #expect(outcome.kind == .verified)
            #expect(try await fixture.ledger.fulfilment(other.transactionId)?.state == .verified)
            // A transaction with a row and a proof kept under it since: both are verified, one call each.
            let first = try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-both"])
            #expect(try await fixture.post(first).status == .ok)
            let second = try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-both"])
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            let newer = ["productId": Self.book, "transactionId": first.transactionId, "receiptData": second.receiptData]
            #expect(try await fixture.post(newer).status == .serviceUnavailable)
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(try await fixture.ledger.pendingProofs(status: .pending, limit: 10).map(\.transactionID) == [first.transactionId])
            let calls = try await Self.calls(fixture, "verifyReceipt")
            let both = try await fixture.admin(.post, "fulfilments/\(first.transactionId)/refulfil", token: Self.adminToken)
            #expect(try DownloadFixture.json(both)["outcome"] as? String == "verified")
            #expect(try await Self.calls(fixture, "verifyReceipt") - calls == 2)
            #expect(try await fixture.ledger.pendingProofs(status: nil, limit: 10).isEmpty, "the kept proof became the proof on record")
            #expect(try await fixture.ledger.fulfilment(first.transactionId)?.proofDigest == VerifiedProof.digest(of: second.receiptData))

            let missing = try await fixture.admin(.post, "fulfilments/2999999999999999/refulfil", token: Self.adminToken)
            #expect(missing.status == .notFound)
            #expect(try DownloadFixture.code(missing) == "unknown_transaction")
            #expect(try await fixture.post(purchase).status == .ok)
        }
    }

    // MARK: 4. Restores check before they read

    @Test(arguments: LedgerEngine.allCases) func aStrangersRestoreReadsNoHistoryAndCannotTellUnknownFromUnbound(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            var victims: [SimulatorControl.Purchase] = []
            for product in [Self.book, Self.big, Self.book] {
                victims.append(
                    try await fixture.control.purchase(["productId": product, "deviceId": "victim", "appAccountToken": Self.owner]))
            }
            let unbound = try await fixture.control.purchase(["productId": Self.book])
            let before = try await fixture.snapshot()
            let historyBefore = try await Self.calls(fixture, "history")

            func restore(_ id: String, _ account: String) async throws -> TestResponse {
                try await fixture.client.execute(
                    uri: "/v1/restores", method: .post,
                    body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["transactionId": id, "appAccountToken": account])))
            }
            var answers: [String] = []
            for id in [victims[0].transactionId, unbound.transactionId, "2999999999999999"] {
                let response = try await restore(id, UUID().uuidString)
                #expect(response.status == .forbidden)
                #expect(try DownloadFixture.code(response) == "account_not_bound")
                let message = (try DownloadFixture.json(response)["error"] as? [String: Any])?["message"] as? String ?? ""
                answers.append("\(response.status.code) " + message.replacingOccurrences(of: id, with: "ID"))
            }
            #expect(Set(answers).count == 1, "an unknown, an unbound and another account's transaction get one answer: \(answers)")
            #expect(try await Self.calls(fixture, "history") == historyBefore, "no history page is read for a stranger")
            #expect(try await fixture.snapshot() == before)

            // The owner restores everything bound to the account.
            let owner = try await restore(victims[0].transactionId, Self.owner.uppercased())
            #expect(owner.status == .ok)
            #expect(try await Self.calls(fixture, "history") > historyBefore)
            for victim in victims { #expect(try await fixture.ledger.fulfilment(victim.transactionId)?.state == .verified) }
        }
    }

    // MARK: 6. The fast path checks the presented proof's account

    @Test(arguments: LedgerEngine.allCases) func aBoundPurchaseIsRefusedOnTheFastPathWithoutItsAccount(_ engine: LedgerEngine) async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            // As on `serve --upstream simulator`: ONE_TIME_CHARGE reaches the server before the purchase returns.
            let url = "http://127.0.0.1:\(try #require(fixture.client.port))/v1/notifications/appstore"
            let set = try await fixture.control.client.execute(
                uri: "/sim/notification-url", method: .put,
                body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: ["url": url])))
            #expect(set.status == .noContent)
            let purchase = try await fixture.control.purchase(["productId": Self.book, "appAccountToken": Self.owner])
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId) != nil })
            #expect(
                try await fixture.ledger.fulfilment(purchase.transactionId)?.appAccountToken == Self.owner,
                "Apple's copy carries the account")
            let before = try await fixture.snapshot()
            let apiBefore = try await fixture.control.serverAPICalls()

            for account in [nil, UUID().uuidString] {
                var fields = ["productId": Self.book, "signedTransaction": purchase.signedTransaction]
                fields["appAccountToken"] = account
                let response = try await fixture.post(fields)
                #expect(response.status == .conflict)
                #expect(try DownloadFixture.code(response) == "transaction_claimed")
                #expect(response.headers[.init("X-Download-Token")!] == nil)
            }
            #expect(try await fixture.snapshot() == before)
            #expect(try await fixture.control.serverAPICalls() == apiBefore, "refused before any upstream call")

            let owner = try await fixture.post([
                "productId": Self.book, "signedTransaction": purchase.signedTransaction, "appAccountToken": Self.owner,
            ])
            #expect(owner.status == .ok)
            #expect(Array(buffer: owner.body) == ServerFixture.book)
        }
    }
}

/// The bounds on kept proofs at the ledger, on both engines, with the clock injected.
@Suite struct PendingProofBoundsLedgerTests {
    static let now = Date(timeIntervalSince1970: 1_790_000_000)

    static func draft(_ transactionID: String, _ index: Int, client: String? = "192.0.2.1", size: Int = 10) -> PendingProofDraft {
        let proof = "p\(index)-" + String(repeating: "x", count: size)
        return PendingProofDraft(
            transactionID: transactionID, digest: VerifiedProof.digest(of: proof), kind: .receipt, proof: proof,
            requestedProductID: "com.example.book",
            appAccountToken: nil, error: "HTTP 503", client: client)
    }

    @Test(arguments: LedgerEngine.allCases) func theBoundsCountEveryStatus(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let bounds = PendingProofBounds(total: 10, perClient: 3, maximumProofBytes: 64)
            // Per transaction: rejecting kept proofs frees no room under the same ID.
            for index in 0..<PendingProof.perTransaction {
                #expect(
                    try await ledger.keepPendingProof(Self.draft("1", index, client: "c\(index)"), bounds: bounds, now: Self.now) == .kept)
            }
            for proof in try await ledger.leasePendingProofs(limit: 10, until: Self.now.addingTimeInterval(60), now: Self.now) {
                try await ledger.rejectPendingProof(id: try #require(proof.id), reason: "21003", now: Self.now)
            }
            #expect(try await ledger.keepPendingProof(Self.draft("1", 99, client: "c9"), bounds: bounds, now: Self.now) == .transactionFull)
            // Per client, then in all.
            for index in 0..<3 {
                #expect(try await ledger.keepPendingProof(Self.draft("c\(index)", index), bounds: bounds, now: Self.now) == .kept)
            }
            #expect(try await ledger.keepPendingProof(Self.draft("c3", 3), bounds: bounds, now: Self.now) == .clientFull)
            #expect(
                try await ledger.keepPendingProof(Self.draft("c0", 0), bounds: bounds, now: Self.now) == .refreshed, "the same proof again")
            for index in 0..<3 {
                #expect(
                    try await ledger.keepPendingProof(
                        Self.draft("t\(index)", index, client: "198.51.100.\(index)"), bounds: bounds, now: Self.now) == .kept)
            }
            #expect(
                try await ledger.keepPendingProof(Self.draft("t9", 9, client: "203.0.113.9"), bounds: bounds, now: Self.now) == .ledgerFull)
            #expect(
                try await ledger.keepPendingProof(Self.draft("big", 0, client: "203.0.113.8", size: 100), bounds: bounds, now: Self.now)
                    == .tooLarge)
            #expect(try await ledger.pendingProofs(status: nil, limit: 100).count == 10)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func rejectedProofsArePurgedAfterTheirRetention(_ engine: LedgerEngine) async throws {
        try await TestLedger.with(engine) { (test: TestLedger) async throws in
            let ledger = test.ledger
            let bounds = PendingProofBounds(total: 5, perClient: 5, rejectedRetention: .seconds(30 * 86_400))
            for index in 0..<5 {
                #expect(try await ledger.keepPendingProof(Self.draft("r\(index)", index), bounds: bounds, now: Self.now) == .kept)
            }
            let leased = try await ledger.leasePendingProofs(limit: 3, until: Self.now.addingTimeInterval(60), now: Self.now)
            for proof in leased { try await ledger.rejectPendingProof(id: try #require(proof.id), reason: "21003", now: Self.now) }
            // Within the retention the rejected ones still hold their places.
            let day29 = Self.now.addingTimeInterval(29 * 86_400)
            #expect(try await ledger.keepPendingProof(Self.draft("n0", 10, client: "x"), bounds: bounds, now: day29) == .ledgerFull)
            #expect(try await ledger.pendingProofs(status: .rejected, limit: 10).count == 3)
            // Past it, keeping a proof purges them first.
            let day31 = Self.now.addingTimeInterval(31 * 86_400)
            #expect(try await ledger.keepPendingProof(Self.draft("n1", 11, client: "x"), bounds: bounds, now: day31) == .kept)
            #expect(try await ledger.pendingProofs(status: .rejected, limit: 10).isEmpty)
            #expect(try await ledger.pendingProofs(status: .pending, limit: 10).count == 3)
            #expect(try await ledger.purgeRejectedPendingProofs(before: day31, limit: 100) == 0)
        }
    }
}

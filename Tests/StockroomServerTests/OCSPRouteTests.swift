import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomSQLite
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// What `--ocsp` decides at the routes: a live server on loopback trusting the test CA of
/// `OCSPResponderFixture`, whose leaves name real `openssl ocsp` responders (or a port nobody
/// listens on: the `down` leaf), and the ledger read afterwards. The checker's own answers are
/// `OCSPRevocationTests`; these show what the client, Apple and the operator get, and that a
/// refusal writes nothing.
///
/// Downloads and restores answer "no usable OCSP answer" (`--ocsp hard`) with 503
/// `upstream_unavailable` and `Retry-After` (README, Revocation), a notification with 503
/// `jws_revocation_unavailable` (docs/contract.md); a revoked certificate is 403
/// `jws_certificate_revoked` at downloads and restores and 400 at the notification route, which
/// answers 400 to every notification that does not verify.
@Suite struct OCSPRouteTests {
    typealias CA = OCSPResponderFixture
    static let book = "com.example.book"
    static let adminToken = "ocsp-route-admin-token-0123456789abcdef"

    /// A server trusting `ca`'s root under `policy`, without App Store Server API credentials
    /// (a signed transaction is decided locally), on `fixture`'s catalogue, content and ledger.
    static func serve<Value: Sendable>(
        _ policy: RevocationPolicy, trusting ca: CA, on fixture: ServerFixture? = nil,
        _ body: @Sendable (any TestClientProtocol, any Ledger) async throws -> Value
    ) async throws -> Value {
        var server = try fixture ?? ServerFixture()
        server.configuration.trustedRoots = [ca.root]
        server.configuration.ocsp = policy
        server.configuration.adminToken = adminToken
        let configured = server
        #expect(configured.configuration.revocationPolicy == policy)
        return try await configured.application().test(.live) { client in
            try await configured.withLedger { ledger in try await body(client, ledger) }
        }
    }

    static func post(_ client: any TestClientProtocol, _ uri: String, _ fields: [String: String]) async throws -> TestResponse {
        try await client.execute(uri: uri, method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
    }

    /// `POST /v1/downloads` with a signed transaction of the book, signed by `ca`'s leaf `leaf`.
    static func download(_ client: any TestClientProtocol, _ ca: CA, by leaf: String, _ transactionID: String) async throws
        -> TestResponse
    {
        let jws = try ca.signedTransaction(by: leaf, transactionID: transactionID, productID: book)
        return try await post(client, "/v1/downloads", ["productId": book, "signedTransaction": jws])
    }

    static func code(_ response: TestResponse) -> String? {
        let object = try? JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        return (object?["error"] as? [String: Any])?["code"] as? String
    }

    /// A REFUND notification for `transactionID`, its payload signed by the leaf `outer` and its
    /// transaction by `inner`.
    static func refund(_ ca: CA, transactionID: String, signedBy outer: String, transactionBy inner: String) throws -> (
        uuid: String, body: String
    ) {
        let uuid = UUID().uuidString
        let payload: [String: Any] = [
            "notificationType": "REFUND", "notificationUUID": uuid, "signedDate": Date().timeIntervalSince1970 * 1000,
            "data": [
                "bundleId": CA.bundle, "environment": "Production",
                "signedTransactionInfo": try ca.signedTransaction(by: inner, transactionID: transactionID, productID: book),
            ],
        ]
        let jws = try ca.jws(by: outer, payload: Array(JSONSerialization.data(withJSONObject: payload)))
        return (uuid, String(decoding: try JSONSerialization.data(withJSONObject: ["signedPayload": jws]), as: UTF8.self))
    }

    /// Nothing on record for `transactionID`: no fulfilment, no pending proof.
    static func nothingRecorded(_ ledger: any Ledger, _ transactionID: String) async throws -> Bool {
        let row = try await ledger.fulfilment(transactionID)
        let pending = try await ledger.pendingProofs(keptUnder: transactionID, limit: 10)
        return row == nil && pending.isEmpty
    }

    /// The row once its download is recorded delivered (within 30 s: the end is recorded after the body went out).
    static func delivered(_ ledger: any Ledger, _ transactionID: String) async throws -> Fulfilment? {
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            if let row = try await ledger.fulfilment(transactionID), row.state == .delivered { return row }
            try await Task.sleep(for: .milliseconds(20))
        }
        return try await ledger.fulfilment(transactionID)
    }

    // MARK: Downloads

    @Test func hardWithTheRespondersDownIsA503WithRetryAfterAndRecordsNothing() async throws {
        let ca = try await CA.start()
        try await Self.serve(.hard, trusting: ca) { client, ledger in
            let response = try await Self.download(client, ca, by: "down", "3000000000000001")
            #expect(response.status == .serviceUnavailable)
            #expect(response.headers[.retryAfter] == "60")
            #expect(Self.code(response) == "upstream_unavailable")
            #expect(try await Self.nothingRecorded(ledger, "3000000000000001"), "no fulfilment, no pending proof")
            #expect(try await ledger.list(FulfilmentListQuery(limit: 100)).isEmpty)
            // The same request again, the failure remembered: still transient, still nothing written.
            let again = try await Self.download(client, ca, by: "down", "3000000000000001")
            #expect(again.status == .serviceUnavailable && again.headers[.retryAfter] == "60")
            #expect(try await Self.nothingRecorded(ledger, "3000000000000001"))
        }
    }

    @Test(arguments: [RevocationPolicy.hard, .soft]) func aRevokedLeafIsRefused403AndRecordsNothing(_ policy: RevocationPolicy)
        async throws
    {
        let ca = try await CA.start()
        try await Self.serve(policy, trusting: ca) { client, ledger in
            let response = try await Self.download(client, ca, by: "revoked", "3000000000000002")
            #expect(response.status == .forbidden)
            #expect(Self.code(response) == "jws_certificate_revoked")
            #expect(response.headers[.retryAfter] == nil, "final, not transient")
            #expect(try await Self.nothingRecorded(ledger, "3000000000000002"))
            #expect(try await ledger.list(FulfilmentListQuery(limit: 100)).isEmpty)
            #expect(CA.asked(ca.leafResponder) == 1, "the responder said revoked")
        }
    }

    @Test func hardWithAGoodResponderDownloadsAfterAskingAboutTheLeafAndTheIntermediate() async throws {
        let ca = try await CA.start()
        try await Self.serve(.hard, trusting: ca) { client, ledger in
            let response = try await Self.download(client, ca, by: "good", "3000000000000003")
            #expect(response.status == .ok)
            let file = Array(buffer: response.body) == ServerFixture.book
            #expect(file, "the whole file")
            #expect(try await Self.delivered(ledger, "3000000000000003")?.state == .delivered)
            #expect(CA.asked(ca.leafResponder) == 1 && CA.asked(ca.rootResponder) == 1)
        }
    }

    /// `stockroom serve --ocsp soft` (its own metrics system): a leaf whose responder is down is
    /// delivered, and the check is counted `unreachable` in `stockroom_ocsp_checks_total` and logged.
    @Test func softWithTheRespondersDownDownloadsAndCountsTheCheckUnreachable() async throws {
        let ca = try await CA.start()
        let folder = try TemporaryFolder()
        try folder.write("content/books/book.epub", ServerFixture.book)
        try folder.write("catalog/products.json", ServerFixture.catalog([ServerFixture.entry(Self.book, file: "books/book.epub")]))
        let port = try StockroomProcess.freePort()
        let server = try StockroomProcess.serve(
            try StockroomProcess.binary(), folder: folder.path, port: port,
            arguments: [
                "--upstream", ServerFixture.unreachableUpstream, "--trust-root", ca.rootPath, "--ocsp", "soft", "--catalog",
                folder.path + "/catalog", "--content", folder.path + "/content", "--database", folder.path + "/ledger.sqlite",
                "--bundle-id", CA.bundle, "--log-level", "info",
            ],
            environment: ["STOCKROOM_TOKEN_SECRET": ServerFixture.tokenSecret])
        defer { server.stop() }
        try await server.waitUntilHealthy()
        func checks() async throws -> [String: Int] {
            let text = String(decoding: try await server.send(.get, "/metrics").body, as: UTF8.self)
            var counts: [String: Int] = [:]
            for line in text.split(separator: "\n") where line.hasPrefix("stockroom_ocsp_checks_total{outcome=\"") {
                let outcome = line.dropFirst("stockroom_ocsp_checks_total{outcome=\"".count).prefix { $0 != "\"" }
                counts[String(outcome)] = Int(line.split(separator: " ").last ?? "")
            }
            return counts
        }
        #expect(try await checks()["unreachable"] == nil, "nothing checked yet")
        let body = try JSONSerialization.data(withJSONObject: [
            "productId": Self.book,
            "signedTransaction": try ca.signedTransaction(by: "down", transactionID: "3000000000000004", productID: Self.book),
        ])
        let response = try await server.send(.post, "/v1/downloads", headers: [("Content-Type", "application/json")], body: Array(body))
        #expect(response.status == 200)
        let file = response.body == ServerFixture.book
        #expect(file, "the whole file")
        let counted = try await checks()
        #expect(counted["unreachable"] == 1, "the leaf: no answer, allowed under soft (\(counted))")
        #expect(counted["good"] == 1, "the intermediate, at the root's responder (\(counted))")
        #expect(server.logText.contains("OCSP: no usable answer"), "one log line names the certificate")
        #expect(server.logText.contains("--ocsp soft"))
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: folder.path + "/ledger.sqlite"))
        #expect(try await ledger.fulfilment("3000000000000004") != nil, "the purchase is on record")
    }

    // MARK: Notifications

    @Test func aNotificationUnderHardWithTheRespondersDownIsA503AndChangesNothing() async throws {
        let ca = try await CA.start()
        try await Self.serve(.hard, trusting: ca) { client, ledger in
            #expect(try await Self.download(client, ca, by: "good", "3000000000000005").status == .ok)
            let before = try #require(try await Self.delivered(ledger, "3000000000000005"))
            #expect(before.state == .delivered)
            for (outer, inner) in [("down", "good"), ("good", "down")] {
                let refund = try Self.refund(ca, transactionID: "3000000000000005", signedBy: outer, transactionBy: inner)
                let response = try await client.execute(
                    uri: "/v1/notifications/appstore", method: .post, body: ByteBuffer(string: refund.body))
                #expect(response.status == .serviceUnavailable, "payload \(outer), transaction \(inner)")
                #expect(response.headers[.retryAfter] == "60")
                #expect(Self.code(response) == "jws_revocation_unavailable")
                #expect(try await ledger.notificationSeen(refund.uuid) == false, "not recorded: Apple sends it again")
                #expect(try await ledger.fulfilment("3000000000000005") == before, "the refund is not applied")
            }
            // The control: the same refund, every certificate answered good, is applied.
            let refund = try Self.refund(ca, transactionID: "3000000000000005", signedBy: "good", transactionBy: "good")
            let applied = try await client.execute(uri: "/v1/notifications/appstore", method: .post, body: ByteBuffer(string: refund.body))
            #expect(applied.status == .ok)
            #expect(String(buffer: applied.body) == #"{"status":"recorded"}"#)
            #expect(try await ledger.notificationSeen(refund.uuid))
            #expect(try await ledger.fulfilment("3000000000000005")?.state == .revoked)
        }
    }

    @Test(arguments: [RevocationPolicy.hard, .soft]) func aNotificationSignedByARevokedLeafIsRefusedAndChangesNothing(
        _ policy: RevocationPolicy
    ) async throws {
        let ca = try await CA.start()
        try await Self.serve(policy, trusting: ca) { client, ledger in
            #expect(try await Self.download(client, ca, by: "good", "3000000000000006").status == .ok)
            let before = try #require(try await Self.delivered(ledger, "3000000000000006"))
            for (outer, inner) in [("revoked", "good"), ("good", "revoked")] {
                let refund = try Self.refund(ca, transactionID: "3000000000000006", signedBy: outer, transactionBy: inner)
                let response = try await client.execute(
                    uri: "/v1/notifications/appstore", method: .post, body: ByteBuffer(string: refund.body))
                #expect(response.status == .badRequest, "payload \(outer), transaction \(inner)")
                #expect(Self.code(response) == "jws_certificate_revoked")
                #expect(response.headers[.retryAfter] == nil)
                #expect(try await ledger.notificationSeen(refund.uuid) == false)
                #expect(try await ledger.fulfilment("3000000000000006") == before)
            }
        }
    }

    // MARK: Restores

    /// Restores need the App Store Server API: the simulator's, whose history is signed by its own
    /// chain (no AIA: nothing to ask); the transaction the client presents is signed by the test
    /// CA, so its chain is what `--ocsp hard` checks before any history is read.
    @Test func aRestoreUnderHardIsA503WithTheRespondersDownA403WhenRevokedAnd200WhenGood() async throws {
        let ca = try await CA.start()
        try await DownloadFixture.run({
            $0.trustedRoots.append(ca.root)
            $0.ocsp = .hard
        }) { fixture in
            let purchase = try await fixture.control.purchase(Self.book)
            let id = purchase.transactionId
            func restore(signedBy leaf: String) async throws -> TestResponse {
                try await Self.post(
                    fixture.client, "/v1/restores",
                    ["signedTransaction": try ca.signedTransaction(by: leaf, transactionID: id, productID: Self.book)])
            }
            let down = try await restore(signedBy: "down")
            #expect(down.status == .serviceUnavailable)
            #expect(down.headers[.retryAfter] == "60")
            #expect(Self.code(down) == "upstream_unavailable")
            #expect(try await Self.nothingRecorded(fixture.ledger, id))

            let revoked = try await restore(signedBy: "revoked")
            #expect(revoked.status == .forbidden)
            #expect(Self.code(revoked) == "jws_certificate_revoked")
            #expect(try await Self.nothingRecorded(fixture.ledger, id))

            let good = try await restore(signedBy: "good")
            #expect(good.status == .ok)
            let products = try DownloadFixture.json(good)["products"] as? [[String: String]] ?? []
            #expect(products.map { $0["transactionId"] } == [id])
            #expect(try await fixture.ledger.fulfilment(id)?.state == .verified)
        }
    }

    // MARK: Re-verification

    /// Purchases on record whose leaf the responder does not know, or whose responder is down,
    /// re-verified by the operator under `--ocsp hard`: each waits, as it was. Two were delivered
    /// under `--ocsp soft`; one is only verified (as a restore leaves it), a state a rejection
    /// would change (a delivered row cannot become rejected).
    @Test func refulfilUnderHardWithNoGoodAnswerLeavesThePurchaseAsItWas() async throws {
        let ca = try await CA.start()
        let fixture = try ServerFixture()
        let delivered = [("down", "3000000000000007"), ("unknown", "3000000000000008")]
        let verified = ("unknown", "3000000000000009")
        try await Self.serve(.soft, trusting: ca, on: fixture) { client, ledger in
            for (leaf, id) in delivered {
                let response = try await Self.download(client, ca, by: leaf, id)
                #expect(response.status == .ok, "soft lets \(leaf) through")
                #expect(try await Self.delivered(ledger, id)?.state == .delivered)
            }
            let offline = SignedTransactionVerifier(root: ca.root, bundleID: CA.bundle, environment: nil)
            let jws = try ca.signedTransaction(by: verified.0, transactionID: verified.1, productID: Self.book)
            let proof = try VerifiedProof.verifying(jws, with: offline).get()
            _ = try await ledger.recordProof(proof, terms: .reverification, now: Date())
            #expect(try await ledger.fulfilment(verified.1)?.state == .verified)
        }
        try await Self.serve(.hard, trusting: ca, on: fixture) { client, ledger in
            for (leaf, id) in delivered + [verified] {
                let before = try #require(try await ledger.fulfilment(id))
                let response = try await client.execute(
                    uri: "/v1/admin/fulfilments/\(id)/refulfil", method: .post, headers: [.authorization: "Bearer \(Self.adminToken)"])
                #expect(response.status == .ok)
                let outcome = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: String] ?? [:]
                #expect(outcome["outcome"] == "unavailable", "\(leaf): \(outcome)")
                #expect(outcome["before"] == before.state.rawValue && outcome["after"] == before.state.rawValue)
                let detail = outcome["detail"] ?? ""
                #expect(leaf == "unknown" ? detail.contains("revocation status is unknown") : detail.hasPrefix("/CN=down"), "\(detail)")
                let after = try #require(try await ledger.fulfilment(id))
                #expect(after.state == before.state, "\(leaf), \(before.state)")
                #expect(after.proofDigest == before.proofDigest && after.revokedAt == nil)
            }
        }
    }
}

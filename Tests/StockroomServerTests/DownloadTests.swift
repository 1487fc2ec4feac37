import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgres
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The download flow against a live simulator: verify, record, stream, resume, status, ack.
@Suite struct DownloadTests {
    @Test(arguments: LedgerEngine.allCases) func aVerifiedDownloadStreamsTheFileAndRecordsIt(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let response = try await fixture.post(purchase)
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(response.headers[.contentLength] == "20000")
            #expect(response.headers[.acceptRanges] == "bytes")
            #expect(response.headers[.eTag] == "\"\(ByteEncoding.hex(SHA256.hash(ServerFixture.book)))\"")
            #expect(response.headers[.init("Repr-Digest")!] == "sha-256=:\(ByteEncoding.base64(SHA256.hash(ServerFixture.book))):")
            #expect(response.headers[.init("X-Transaction-Id")!] == purchase.transactionId)
            #expect(response.headers[.location] == "/v1/downloads/\(purchase.transactionId)/content")
            #expect(response.headers[.init("X-Download-Token")!]?.hasPrefix("v1.") == true)

            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.attempts == 1)
            #expect(row.bytesDelivered == 20_000)
            #expect(row.environment == .production)
            #expect(row.proof == purchase.receiptData)
            #expect(try await fixture.ledger.attempts(of: purchase.transactionId).map(\.outcome) == [.complete])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theSamePostAgainIsIdempotentAndSparesTheUpstream(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            for _ in 0..<3 { #expect(try await fixture.post(purchase).status == .ok) }
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 3 })
            let rows = try await fixture.ledger.list(FulfilmentListQuery())
            #expect(rows.count == 1)
            #expect(rows.first?.attempts == 3)
            let calls = try await fixture.control.calls()
            #expect(calls.total == 1)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func withoutATransactionIDTheProductsPurchaseIsRecorded(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(purchase, transaction: false).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) != nil)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aResumeHonoursRangeAndIfRange(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let first = try await fixture.post(purchase)
            let token = try #require(first.headers[.init("X-Download-Token")!])
            let etag = try #require(first.headers[.eTag])
            let uri = "/v1/downloads/\(purchase.transactionId)/content"

            let tail = try await fixture.get(uri, token: token, headers: [.range: "bytes=15000-", .ifRange: etag])
            #expect(tail.status == .partialContent)
            #expect(Array(buffer: tail.body) == Array(ServerFixture.book[15000...]))
            #expect(tail.headers[.contentRange] == "bytes 15000-19999/20000")
            let suffix = try await fixture.get(uri, token: token, headers: [.range: "bytes=-100"])
            #expect(Array(buffer: suffix.body) == Array(ServerFixture.book.suffix(100)))
            let stale = try await fixture.get(uri, token: token, headers: [.range: "bytes=15000-", .ifRange: "\"old\""])
            #expect(stale.status == .ok)
            #expect(Array(buffer: stale.body) == ServerFixture.book)
            let beyond = try await fixture.get(uri, token: token, headers: [.range: "bytes=20000-"])
            #expect(beyond.status == .rangeNotSatisfiable)
            #expect(beyond.headers[.contentRange] == "bytes */20000")
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.attempts == 5 })
            let calls = try await fixture.control.calls()
            #expect(calls.total == 1, "resumes need no upstream call")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func tokensAreRequiredAuthenticAndUnexpired(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let other = try await fixture.control.purchase(DownloadFixture.book)
            let otherToken = try #require(try await fixture.post(other).headers[.init("X-Download-Token")!])
            _ = try await fixture.post(purchase)
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 1 })
            let before = try await fixture.snapshot()
            let uri = "/v1/downloads/\(purchase.transactionId)/content"
            let cases: [(String?, HTTPResponse.Status, String)] = [
                (nil, .unauthorized, "token_missing"),
                ("garbage", .forbidden, "token_invalid"),
                (otherToken, .forbidden, "token_invalid"),
                (
                    DownloadFixture.token(purchase.transactionId, issuedAt: Date(timeIntervalSinceNow: -7200)), .unauthorized,
                    "token_expired"
                ),
            ]
            for (token, status, code) in cases {
                let response = try await fixture.get(uri, token: token)
                #expect(response.status == status)
                #expect(try DownloadFixture.code(response) == code)
            }
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func statusAndAckTellWhenItIsSafeToFinish(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let token = try #require(try await fixture.post(purchase).headers[.init("X-Download-Token")!])
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            let status = try DownloadFixture.json(try await fixture.get("/v1/downloads/\(purchase.transactionId)", token: token))
            #expect(status["state"] as? String == "delivered")
            #expect(status["safeToFinish"] as? Bool == false)
            #expect(status["bytesDelivered"] as? Int == 20_000)

            let ack = try await fixture.ack(purchase.transactionId, token: token)
            #expect(ack.status == .ok)
            #expect(try DownloadFixture.json(ack)["safeToFinish"] as? Bool == true)
            #expect(try await fixture.ack(purchase.transactionId, token: token).status == .ok, "ack is idempotent")
            // An expired but authentic token still reads the status.
            let late = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)",
                token: DownloadFixture.token(purchase.transactionId, issuedAt: Date(timeIntervalSinceNow: -7200)))
            #expect(try DownloadFixture.json(late)["state"] as? String == "acknowledged")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aClientThatDisconnectsLeavesTheTransactionVerifiedWithItsBytesLogged(
        _ engine: LedgerEngine
    ) async throws {
        // 128 MiB: more than socket and channel buffers can swallow for a client that stopped.
        try await DownloadFixture.run(engine: engine, AttackLimitTests.withHugeProduct) { fixture in
            let product = AttackLimitTests.huge
            let size = Int64(128 << 20)
            let purchase = try await fixture.control.purchase(product)
            let body = try JSONSerialization.data(withJSONObject: [
                "productId": product, "transactionId": purchase.transactionId, "receiptData": purchase.receiptData,
            ])
            let impatient = CurlHTTPClient(configuration: .init(maximumResponseBytes: 256 * 1024))
            await #expect(throws: UpstreamError.responseTooLarge(limit: 256 * 1024)) {
                _ = try await impatient.send(
                    UpstreamRequest(method: .post, url: "http://127.0.0.1:\(fixture.client.port!)/v1/downloads", body: Array(body)))
            }
            #expect(try await fixture.eventually { try await !fixture.ledger.attempts(of: purchase.transactionId).isEmpty })
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.state == .verified)
            #expect(row.bytesDelivered > 0 && row.bytesDelivered < size)
            #expect(try await fixture.ledger.attempts(of: purchase.transactionId).map(\.outcome) == [.interrupted])

            // Not delivered yet, so not acknowledgeable; the file's tail alone does not deliver it
            // (most bytes never went out), the rest from where the cut left off does.
            let token = DownloadFixture.token(purchase.transactionId, product: product)
            let early = try await fixture.ack(purchase.transactionId, token: token)
            #expect(early.status == .conflict)
            #expect(try DownloadFixture.code(early) == "not_delivered")
            let tail = try await fixture.get(
                "/v1/downloads/\(purchase.transactionId)/content", token: token, headers: [.range: "bytes=-4096"])
            #expect(tail.status == .partialContent)
            #expect(Array(buffer: tail.body) == [UInt8](repeating: 0, count: 4096))
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 2 })
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified)
            let cut = try #require(try await fixture.ledger.fulfilment(purchase.transactionId)?.sentBytes?.ranges.first).upperBound
            let rest = try await DeliveryRecordTests.fetch(fixture, purchase.transactionId, range: "bytes=\(cut + 1)-\(size - 4097)")
            #expect(rest == (206, Int(size - 4096 - cut - 1)))
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
        }
    }

    @Test(arguments: LedgerEngine.allCases) func anUnavailableUpstreamKeepsTheReceiptAsAPendingProof(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 10])
            let response = try await fixture.post(purchase)
            #expect(response.status == .serviceUnavailable)
            #expect(try DownloadFixture.code(response) == "upstream_unavailable")
            #expect(response.headers[.retryAfter] == "30")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId) == nil, "kept apart, not an entitlement")
            let kept = try #require(try await fixture.ledger.pendingProofs(status: .pending, limit: 10).first)
            #expect(kept.transactionID == purchase.transactionId)
            #expect(kept.proof == purchase.receiptData)
            #expect(kept.lastError?.contains("HTTP 503") == true)

            // Once Apple answers again, the same request verifies and delivers.
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(try await fixture.post(purchase).status == .ok)
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            #expect(try await fixture.ledger.pendingProofs(status: nil, limit: 10).isEmpty, "the verified proof is no longer pending")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aPendingReceiptIsKeptUnderItsTransactionIDEvenWhenTheAppNamesNone(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 10])
            #expect(try await fixture.post(purchase, transaction: false).status == .serviceUnavailable)
            let kept = try #require(
                try await fixture.ledger.pendingProofs(status: .pending, limit: 10).first, "the ID read from the receipt itself")
            #expect(kept.transactionID == purchase.transactionId)
            #expect(kept.proof == purchase.receiptData)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRejectedReceiptAddsNoRow(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let foreign = try await fixture.control.purchase(["productId": DownloadFixture.book, "bundleId": "com.example.other"])
            let book = try await fixture.control.purchase(DownloadFixture.book)
            let garbage = ByteEncoding.base64(Array("not a receipt".utf8))
            let cases: [([String: String], String)] = [
                (
                    ["productId": DownloadFixture.book, "transactionId": foreign.transactionId, "receiptData": foreign.receiptData],
                    "bundle_mismatch"
                ),
                (["productId": "com.example.big", "receiptData": book.receiptData], "product_not_in_receipt"),
                (
                    ["productId": DownloadFixture.book, "transactionId": "2999", "receiptData": book.receiptData],
                    "transaction_not_in_receipt"
                ),
                (["productId": DownloadFixture.book, "transactionId": "2999", "receiptData": garbage], "receipt_malformed"),
            ]
            for (fields, code) in cases {
                let response = try await fixture.post(fields)
                #expect(response.status == .forbidden)
                #expect(try DownloadFixture.code(response) == code)
                #expect((try DownloadFixture.json(response)["error"] as? [String: Any])?["kind"] as? String == "receipt_rejected")
            }
            #expect(try await fixture.snapshot() == [])
        }
    }

    /// Apple: a receipt's `transaction_id` "may not be the same" as `SKPaymentTransaction`'s. A
    /// transaction the receipt lists under another ID is found by its original transaction and
    /// product, and named in `X-Transaction-Id`; another chain's original finds nothing, and a
    /// malformed one is a 400.
    @Test(arguments: LedgerEngine.allCases) func aTransactionTheReceiptListsUnderAnotherIDIsFoundByItsOriginalAndProduct(
        _ engine: LedgerEngine
    ) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let book = try await fixture.control.purchase(DownloadFixture.book)
            let other = try await fixture.control.purchase(DownloadFixture.book)
            func post(original: String) async throws -> TestResponse {
                try await fixture.post([
                    "productId": DownloadFixture.book, "transactionId": "2999", "originalTransactionId": original,
                    "receiptData": book.receiptData,
                ])
            }
            let wrong = try await post(original: other.originalTransactionId)
            #expect(wrong.status == .forbidden)
            #expect(try DownloadFixture.code(wrong) == "transaction_not_in_receipt")
            let malformed = try await post(original: "../1")
            #expect(malformed.status == .badRequest)
            #expect(try DownloadFixture.code(malformed) == "bad_request")
            #expect(try await fixture.snapshot() == [], "refusals record nothing")

            let response = try await post(original: book.originalTransactionId)
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(response.headers[.init("X-Transaction-Id")!] == book.transactionId)
            #expect(response.headers[.location] == "/v1/downloads/\(book.transactionId)/content")
            #expect(try await fixture.ledger.fulfilment("2999") == nil)
            #expect(try await fixture.ledger.fulfilment(book.transactionId)?.productID == DownloadFixture.book)
            #expect(try await fixture.control.calls().total == 1, "the second reading of the receipt is the cached answer")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRevokedTransactionIsRefusedOnEveryRoute(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let token = try #require(try await fixture.post(purchase).headers[.init("X-Download-Token")!])
            #expect(try await fixture.eventually { try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .delivered })
            _ = try await fixture.ledger.revoke(
                RevokedPurchase(
                    transactionID: purchase.transactionId, originalTransactionID: purchase.originalTransactionId, productID: nil,
                    bundleID: nil, environment: nil),
                cause: .operatorAction, reason: "test", now: Date())
            let before = try await fixture.snapshot()
            let responses = [
                try await fixture.post(purchase),
                try await fixture.get("/v1/downloads/\(purchase.transactionId)/content", token: token),
                try await fixture.get("/v1/downloads/\(purchase.transactionId)", token: token),
                try await fixture.ack(purchase.transactionId, token: token),
            ]
            for response in responses {
                #expect(response.status == .forbidden)
                #expect(try DownloadFixture.code(response) == "revoked")
            }
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundAppleReportsRevokesThePurchaseAndItsRestores(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let original = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(original).status == .ok)
            let restore = try await fixture.control.purchase([
                "productId": DownloadFixture.book, "originalTransactionId": original.transactionId,
            ])
            let restored = try await fixture.post(restore)
            #expect(restored.status == .ok, "a restore is served as the same purchase")
            #expect(try await fixture.ledger.fulfilment(restore.transactionId)?.originalTransactionID == original.transactionId)

            try await fixture.control.refund(original.transactionId)
            let fresh = try await fixture.control.purchase(["productId": DownloadFixture.book, "deviceId": original.deviceId])
            // A newer receipt of the device tells of the refund; the ledger revokes the purchase.
            let response = try await fixture.post([
                "productId": DownloadFixture.book, "transactionId": original.transactionId, "receiptData": fresh.receiptData,
            ])
            #expect(try DownloadFixture.code(response) == "revoked")
            #expect(try await fixture.ledger.fulfilment(original.transactionId)?.state == .revoked)
            #expect(try await fixture.ledger.fulfilment(restore.transactionId)?.state == .revoked)
        }
    }

    @Test(
        arguments: [
            (#"not json"#, HTTPResponse.Status.badRequest, "bad_request"),
            (#"[]"#, .badRequest, "bad_request"),
            (#"{}"#, .badRequest, "bad_request"),
            (#"{"productId": 5, "receiptData": "AAAA"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "consent": "yes"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "consent": 1}"#, .badRequest, "bad_request"),
            (#"{"productId": "bad..id", "receiptData": "AAAA"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "signedTransaction": "a.b.c"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "%%%"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": ""}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": " \n\t "}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "QUJD!"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "QUJD=QUJD"}"#, .forbidden, "receipt_malformed"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "transactionId": "../x"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "transactionId": ".."}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "receiptData": "AAAA", "originalTransactionId": "1.2"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "not-a-jws"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "a.b"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "a.b.c.d"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "a..b."}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "a.b.c", "appAccountToken": "nope"}"#, .badRequest, "bad_request"),
            (#"{"productId": "com.example.book", "signedTransaction": "a.b.c"}"#, .forbidden, "jws_malformed"),
            (#"{"productId": "com.example.nope", "receiptData": "AAAA"}"#, .notFound, "unknown_product"),
        ], LedgerEngine.allCases)
    func badRequestsAreRefusedAndChangeNothing(_ request: (String, HTTPResponse.Status, String), engine: LedgerEngine) async throws {
        let (body, status, code) = request
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            _ = try await fixture.post(purchase)
            #expect(try await fixture.eventually { try await fixture.ledger.attempts(of: purchase.transactionId).count == 1 })
            let before = try await fixture.snapshot()
            let response = try await fixture.client.execute(uri: "/v1/downloads", method: .post, body: ByteBuffer(string: body))
            #expect(response.status == status)
            #expect(try DownloadFixture.code(response) == code)
            #expect(try await fixture.snapshot() == before)
            let calls = try await fixture.control.calls()
            #expect(calls.total == 1, "a refused request never reaches the App Store")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func oversizedBodiesAndBadPathsAreRefused(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let tooLarge = try await fixture.client.execute(
                uri: "/v1/downloads", method: .post,
                body: ByteBuffer(
                    string: #"{"productId": "com.example.book", "receiptData": ""# + String(repeating: "A", count: 1 << 20) + #""}"#))
            #expect(tooLarge.status == .contentTooLarge)
            #expect(try DownloadFixture.code(tooLarge) == "body_too_large")
            let badID = try await fixture.get("/v1/downloads/a%20b/content", token: "x")
            #expect(badID.status == .badRequest)
            let unknown = try await fixture.get("/v1/downloads/2999/content", token: DownloadFixture.token("2999"))
            #expect(unknown.status == .notFound)
            #expect(try DownloadFixture.code(unknown) == "unknown_transaction")
            #expect(try await fixture.snapshot() == [])
        }
    }

    // MARK: StoreKit 2

    @Test(arguments: LedgerEngine.allCases) func aSignedTransactionDownloadsWithoutAnUpstreamCall(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            // Wrapped in the white space a client may add: the proof kept is the JWS alone.
            let response = try await fixture.post([
                "productId": DownloadFixture.book, "signedTransaction": "\n \(purchase.signedTransaction)\r\n",
            ])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId))
            #expect(row.proofKind == .signedTransaction)
            #expect(row.proof == purchase.signedTransaction)
            #expect(row.environment == .production)
            let calls = try await fixture.control.calls()
            #expect(calls == .init(production: 0, sandbox: 0, total: 1), "verified locally, confirmed by one Server API call")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func rejectedSignedTransactionsChangeNothing(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let level = try await fixture.control.purchase("com.example.big")
            let parts = purchase.signedTransaction.split(separator: ".").map(String.init)
            // The same transaction, its product swapped for another, the signature kept.
            let payload = String(decoding: ByteEncoding.decodeBase64(parts[1])!, as: UTF8.self)
                .replacingOccurrences(of: DownloadFixture.book, with: "com.example.big")
            let tampered = [parts[0], ByteEncoding.base64URL(Array(payload.utf8)), parts[2]].joined(separator: ".")
            let cases: [([String: String], String)] = [
                (["productId": "com.example.big", "signedTransaction": tampered], "jws_bad_signature"),
                (["productId": DownloadFixture.book, "signedTransaction": level.signedTransaction], "product_mismatch"),
                (
                    ["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction, "transactionId": "2999"],
                    "transaction_not_in_receipt"
                ),
            ]
            for (fields, code) in cases {
                let response = try await fixture.post(fields)
                #expect(response.status == .forbidden)
                #expect(try DownloadFixture.code(response) == code)
            }
            #expect(try await fixture.snapshot() == [])
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRevokedSignedTransactionRevokesThePurchase(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            #expect(
                try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction]).status == .ok)
            let revoked = try await fixture.control.refund(purchase.transactionId)
            let response = try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": revoked])
            #expect(response.status == .forbidden)
            #expect(try DownloadFixture.code(response) == "revoked")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .revoked)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func theServerAPICatchesARefundTheAppsCopyDoesNotShow(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            try await fixture.control.refund(purchase.transactionId)
            // The app still holds the JWS signed before the refund.
            let response = try await fixture.post(["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction])
            #expect(try DownloadFixture.code(response) == "revoked")
            let row = try #require(try await fixture.ledger.fulfilment(purchase.transactionId), "recorded as revoked")
            #expect(row.state == .revoked)
            let calls = try await fixture.control.calls()
            #expect(calls.total == 1, "one Server API call, no verifyReceipt")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aTransactionOfAnotherAppAccountIsClaimed(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let owner = "8F2E6A4C-0000-4000-8000-000000000001"
            let purchase = try await fixture.control.purchase(["productId": DownloadFixture.book, "appAccountToken": owner])
            let stranger = try await fixture.post([
                "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction,
                "appAccountToken": "0B7A3D9E-0000-4000-8000-000000000002",
            ])
            #expect(stranger.status == .conflict)
            #expect(try DownloadFixture.code(stranger) == "transaction_claimed")
            #expect(try await fixture.snapshot() == [])
            let ownerResponse = try await fixture.post([
                "productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction, "appAccountToken": owner,
            ])
            #expect(ownerResponse.status == .ok)
        }
    }

    @Test func aLostPostgreSQLLedgerAnswers503AndTheServerRecoversWithoutARestart() async throws {
        try await DownloadFixture.run(engine: .postgres, { $0.databaseTimeout = .seconds(5) }) { fixture in
            let purchase = try await fixture.control.purchase(DownloadFixture.book)
            let first = try await fixture.post(purchase)
            #expect(first.status == .ok)
            let token = try #require(first.headers[.init("X-Download-Token")!])
            let status = "/v1/downloads/\(purchase.transactionId)"
            // The ledger's database goes away: connections cut, new ones refused.
            let cluster = try ScratchPostgres.cluster()
            let database = try PostgresAddress(url: fixture.databaseLocation).database
            try await ScratchPostgres.admin(cluster, "ALTER DATABASE \(database) ALLOW_CONNECTIONS false")
            try await ScratchPostgres.admin(cluster, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '\(database)'")
            // Answered, and soon: HummingbirdTesting's client cannot give up on a server that never
            // answers, so a hang here fails the test instead of holding the run. (The delivery
            // record of the POST above, cut with the database, once held this request for good.)
            let started = ContinuousClock.now
            let answered = await within(.seconds(60)) { () async -> Result<TestResponse, any Error> in
                do { return .success(try await fixture.get(status, token: token)) } catch { return .failure(error) }
            }
            let lost = try #require(answered, "the request was answered").get()
            #expect(
                ContinuousClock.now - started < .seconds(25),
                "the lease timeout (5 s) with room for busy cores, not the call deadline (30 s)")
            #expect(lost.status == .serviceUnavailable)
            #expect(try DownloadFixture.code(lost) == "ledger_unavailable")
            #expect(Int(lost.headers[.retryAfter] ?? "") ?? 0 >= 1)
            // It comes back: the same server answers again.
            try await ScratchPostgres.admin(cluster, "ALTER DATABASE \(database) ALLOW_CONNECTIONS true")
            let deadline = ContinuousClock.now + .seconds(30)
            var answer = try await fixture.get(status, token: token)
            while answer.status == .serviceUnavailable, ContinuousClock.now < deadline {
                try await Task.sleep(for: .milliseconds(200))
                answer = try await fixture.get(status, token: token)
            }
            #expect(answer.status == .ok)
            #expect(try DownloadFixture.json(answer)["state"] as? String != nil)
        }
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `POST /v1/restores` through a live server verifying against the live simulator.
@Suite struct RestoreTests {
    static let book = "com.example.book"
    static let big = "com.example.big"
    /// Sold by the simulator, not in the server's catalogue.
    static let elsewhere = "com.example.stockroom.demo.book1"
    static let account = "6f1c3b54-9a1e-4a53-9d3b-0c2f4f1b7a10"

    static func restore(_ fixture: DownloadFixture, _ fields: [String: String]) async throws -> TestResponse {
        try await fixture.client.execute(
            uri: "/v1/restores", method: .post, body: ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields)))
    }

    /// The products of a 200 answer, by product ID.
    static func products(_ response: TestResponse) throws -> [String: [String: String]] {
        let list = try DownloadFixture.json(response)["products"] as? [[String: String]] ?? []
        return Dictionary(list.map { ($0["productId"] ?? "", $0) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func aSignedTransactionRestoresEveryCataloguePurchaseOfItsCustomerAcrossPagesAndNoOtherDevices() async throws {
        // The test client connects first; 24 purchases on a loaded machine can outlast the head deadline.
        try await DownloadFixture.run({
            $0.headerTimeout = .seconds(300); $0.idleTimeout = .seconds(300)
        }) { fixture in
            let first = try await fixture.control.purchase(["productId": Self.elsewhere, "deviceId": "device-a"])
            for _ in 0..<20 { _ = try await fixture.control.purchase(["productId": Self.elsewhere, "deviceId": "device-a"]) }
            let book = try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-a"])
            let big = try await fixture.control.purchase(["productId": Self.big, "deviceId": "device-a"])
            let stranger = try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-b"])

            let response = try await Self.restore(fixture, ["signedTransaction": first.signedTransaction])
            #expect(response.status == .ok)
            let products = try Self.products(response)
            #expect(Set(products.keys) == [Self.book, Self.big], "the catalogue's purchases, from the second page too")
            #expect(products[Self.book]?["transactionId"] == book.transactionId)
            #expect(products[Self.big]?["transactionId"] == big.transactionId)
            #expect(try await fixture.ledger.fulfilment(stranger.transactionId) == nil, "another device's purchase is not this customer's")
            #expect(try await fixture.ledger.fulfilment(first.transactionId) == nil, "a product not in the catalogue is skipped")
            #expect(try await fixture.ledger.fulfilment(book.transactionId)?.state == .verified)

            let location = try #require(products[Self.book]?["location"])
            #expect(location == "/v1/downloads/\(book.transactionId)/content")
            let download = try await fixture.get(location, token: products[Self.book]?["token"])
            #expect(download.status == .ok)
            #expect(Array(buffer: download.body) == ServerFixture.book, "the token downloads the bytes")
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefundedPurchaseAndOneAnOperatorRevokedAreNeverOffered(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let book = try await fixture.control.purchase(["productId": Self.book, "deviceId": "device-a"])
            let big = try await fixture.control.purchase(["productId": Self.big, "deviceId": "device-a"])
            try await fixture.control.refund(big.transactionId)

            let restored = try await Self.restore(fixture, ["signedTransaction": book.signedTransaction])
            #expect(restored.status == .ok)
            #expect(Set(try Self.products(restored).keys) == [Self.book], "the refunded purchase is not offered")
            #expect(try await fixture.ledger.fulfilment(big.transactionId)?.state == .revoked, "Apple's refund is recorded")

            _ = try await fixture.ledger.revoke(
                RevokedPurchase(
                    transactionID: book.transactionId, originalTransactionID: book.originalTransactionId, productID: nil, bundleID: nil,
                    environment: nil),
                cause: .operatorAction, reason: "test", now: Date())
            let again = try await Self.restore(fixture, ["signedTransaction": book.signedTransaction])
            #expect(again.status == .ok)
            #expect(try Self.products(again).isEmpty, "an operator's revocation stands")
            #expect(try await fixture.ledger.fulfilment(book.transactionId)?.state == .revoked)
        }
    }

    @Test func aBareTransactionIDRestoresOnlyWhatIsBoundToTheAccountItNames() async throws {
        try await DownloadFixture.run { fixture in
            let bound = try await fixture.control.purchase([
                "productId": Self.book, "deviceId": "device-a", "appAccountToken": Self.account,
            ])
            let unbound = try await fixture.control.purchase(["productId": Self.big, "deviceId": "device-a"])
            let before = try await fixture.snapshot()

            let noAccount = try await Self.restore(fixture, ["transactionId": bound.transactionId])
            #expect(noAccount.status == .forbidden)
            #expect(try DownloadFixture.code(noAccount) == "account_required")
            let otherAccount = try await Self.restore(
                fixture, ["transactionId": bound.transactionId, "appAccountToken": UUID().uuidString])
            #expect(otherAccount.status == .forbidden)
            #expect(try DownloadFixture.code(otherAccount) == "account_not_bound")
            let unboundNamed = try await Self.restore(fixture, ["transactionId": unbound.transactionId, "appAccountToken": Self.account])
            #expect(unboundNamed.status == .forbidden)
            #expect(try DownloadFixture.code(unboundNamed) == "account_not_bound")
            // An unknown ID is answered as an unbound one: the route does not tell which IDs exist.
            let unknown = try await Self.restore(fixture, ["transactionId": "2999999999999999", "appAccountToken": Self.account])
            #expect(unknown.status == .forbidden)
            #expect(try DownloadFixture.code(unknown) == "account_not_bound")
            #expect(try await fixture.snapshot() == before, "refusals change nothing")

            let restored = try await Self.restore(
                fixture, ["transactionId": bound.transactionId, "appAccountToken": Self.account.uppercased()])
            #expect(restored.status == .ok)
            #expect(Set(try Self.products(restored).keys) == [Self.book], "only the purchase bound to the account")
            #expect(try await fixture.ledger.fulfilment(unbound.transactionId) == nil)
        }
    }

    @Test func aSignedTransactionForAnotherAccountThanTheRequestNamesIsRefused() async throws {
        try await DownloadFixture.run { fixture in
            let bound = try await fixture.control.purchase(["productId": Self.book, "appAccountToken": Self.account])
            let response = try await Self.restore(
                fixture, ["signedTransaction": bound.signedTransaction, "appAccountToken": UUID().uuidString])
            #expect(response.status == .conflict)
            #expect(try DownloadFixture.code(response) == "transaction_claimed")
            #expect(try await fixture.snapshot().isEmpty)
        }
    }

    @Test func anAppStoreOutageIs503WithRetryAfterAndRestoresNothing() async throws {
        try await DownloadFixture.run { fixture in
            let book = try await fixture.control.purchase(["productId": Self.book])
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 50])
            let response = try await Self.restore(fixture, ["signedTransaction": book.signedTransaction])
            #expect(response.status == .serviceUnavailable)
            #expect(try DownloadFixture.code(response) == "upstream_unavailable")
            #expect(response.headers[.retryAfter] != nil)
            #expect(try await fixture.snapshot().isEmpty, "the ledger is unchanged")
        }
    }

    @Test func aClientThatKeepsAskingIsHeldBackWith429AndChangesNothing() async throws {
        try await DownloadFixture.run({ $0.upstreamRate = UpstreamRate(requests: 1, per: .seconds(3600)) }) { fixture in
            let book = try await fixture.control.purchase(["productId": Self.book])
            #expect(try await Self.restore(fixture, ["signedTransaction": book.signedTransaction]).status == .ok)
            let before = try await fixture.snapshot()
            let again = try await Self.restore(fixture, ["signedTransaction": book.signedTransaction])
            #expect(again.status == .tooManyRequests)
            #expect(try DownloadFixture.code(again) == "rate_limited")
            #expect(again.headers[.retryAfter] != nil)
            #expect(try await fixture.snapshot() == before)
        }
    }

    @Test func withoutServerAPICredentialsRestoresAreNotConfigured() async throws {
        try await DownloadFixture.run({ $0.serverAPICredentials = nil }) { fixture in
            let book = try await fixture.control.purchase(["productId": Self.book])
            let response = try await Self.restore(fixture, ["signedTransaction": book.signedTransaction])
            #expect(response.status == .notImplemented)
            #expect(try DownloadFixture.code(response) == "restores_not_configured")
        }
    }

    @Test func badBodiesAndForgedProofsAreRefusedAndChangeNothing() async throws {
        try await DownloadFixture.run { fixture in
            let book = try await fixture.control.purchase(["productId": Self.book])
            let bodies: [String] = [
                "not json", "[]", "{}", #"{"transactionId": 42}"#,
                #"{"signedTransaction": "\#(book.signedTransaction)", "transactionId": "\#(book.transactionId)"}"#,
                #"{"transactionId": "../etc", "appAccountToken": "\#(Self.account)"}"#,
                #"{"transactionId": "\#(book.transactionId)", "appAccountToken": "not-a-uuid"}"#,
                #"{"signedTransaction": "only.two"}"#,
            ]
            for body in bodies {
                let response = try await fixture.client.execute(uri: "/v1/restores", method: .post, body: ByteBuffer(string: body))
                #expect(response.status == .badRequest, "\(body)")
                #expect(try DownloadFixture.code(response) == "bad_request")
            }
            var parts = book.signedTransaction.split(separator: ".").map(String.init)
            parts[1] = ByteEncoding.base64URL(Array(#"{"transactionId":"1","productId":"com.example.big"}"#.utf8))
            let forged = try await Self.restore(fixture, ["signedTransaction": parts.joined(separator: ".")])
            #expect(forged.status == .forbidden)
            #expect(try await fixture.snapshot().isEmpty)
        }
    }
}

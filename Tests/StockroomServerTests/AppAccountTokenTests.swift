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

/// Set App Account Token through a live server and the simulator: a claim that binds a purchase
/// Apple holds without an account tells Apple, through the durable queue of calls owed to it,
/// and Apple's later transactions carry the account; Apple being down only delays it.
@Suite struct AppAccountTokenTests {
    static let account = "5A0D3C2B-1E4F-4A6B-8C7D-9E0F1A2B3C4D"

    /// Buys the book without an account (as an offer code redeemed in the App Store would).
    static func buy(_ fixture: DownloadFixture, account: String? = nil) async throws -> SimulatorControl.Purchase {
        var fields = ["productId": DownloadFixture.book]
        if let account { fields["appAccountToken"] = account }
        return try await fixture.control.purchase(fields)
    }

    /// Claims `purchase` with its signed transaction, naming `account`.
    static func claim(_ fixture: DownloadFixture, _ purchase: SimulatorControl.Purchase, account: String?) async throws -> TestResponse {
        var fields = ["productId": DownloadFixture.book, "signedTransaction": purchase.signedTransaction]
        if let account { fields["appAccountToken"] = account }
        return try await fixture.post(fields)
    }

    /// Set App Account Token calls the simulator received, faulted ones included.
    static func appleCalls(_ fixture: DownloadFixture) async throws -> Int {
        let response = try await fixture.control.client.execute(uri: "/sim/stats", method: .get)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        return ((object?["endpoints"] as? [String: [String: Int]])?["appAccountToken"] ?? [:]).values.reduce(0, +)
    }

    static func calls(_ fixture: DownloadFixture) async throws -> [ServerCall] {
        try await fixture.ledger.serverCalls(ServerCallListQuery(kind: .appAccountToken))
    }

    /// The appAccountToken in a JWS's payload (the simulator signed it; read only).
    static func signedAccount(_ jws: String) throws -> String? {
        try ServerAPIJWS.payload(jws)["appAccountToken"] as? String
    }

    @Test(arguments: LedgerEngine.allCases) func aClaimTellsAppleTheAccountAndAppleSignsItIntoLaterTransactions(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await Self.buy(fixture)
            #expect(try Self.signedAccount(purchase.signedTransaction) == nil)
            // No consent, no acknowledgement: the binding alone owes Apple the call.
            #expect(try await Self.claim(fixture, purchase, account: Self.account).status == .ok)
            let bound = Self.account.lowercased()
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.appAccountToken == bound)
            #expect(
                try await LifecycleTests.eventually(seconds: 30) {
                    try await LifecycleTests.apple(fixture, purchase.transactionId)["appAccountToken"] as? String == bound
                })
            #expect(try await LifecycleTests.eventually(seconds: 30) { try await Self.calls(fixture).first?.status == .sent })
            let call = try #require(try await Self.calls(fixture).first)
            #expect(call.transactionID == purchase.originalTransactionId && call.environment == .production && call.attempts == 0)
            #expect(call.body == #"{"appAccountToken":"\#(bound)"}"#)

            // Apple's later signed copies carry it: a renewal of the purchase, and a notification about it.
            let renewal = try await fixture.control.purchase(
                json: ["productId": DownloadFixture.book, "originalTransactionId": purchase.transactionId])
            #expect(try Self.signedAccount(renewal.signedTransaction) == bound)
            let minted = try await LifecycleTests.mint(fixture, ["type": "ONE_TIME_CHARGE", "transactionId": purchase.transactionId])
            let envelope = try #require(try JSONSerialization.jsonObject(with: Data(buffer: minted)) as? [String: Any])
            let notification = try #require(envelope["signedPayload"] as? String)
            let data = try #require(try ServerAPIJWS.payload(notification)["data"] as? [String: Any])
            #expect(try Self.signedAccount(try #require(data["signedTransactionInfo"] as? String)) == bound)
            // The renewal, claimed by the same account, carries it: nothing more is owed.
            #expect(try await Self.claim(fixture, renewal, account: Self.account).status == .ok)
            // Another claim of the first by the same account changes nothing either.
            #expect(try await Self.claim(fixture, purchase, account: Self.account).status == .ok)
            #expect(try await Self.calls(fixture).count == 1)
            #expect(try await Self.appleCalls(fixture) == 1)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aClaimOfAPurchaseAppleSignedWithAnAccountOrOfNoAccountOwesNothing(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            let signed = try await Self.buy(fixture, account: Self.account)
            #expect(try await Self.claim(fixture, signed, account: Self.account).status == .ok)
            let unbound = try await Self.buy(fixture)
            #expect(try await Self.claim(fixture, unbound, account: nil).status == .ok)
            // The call is queued in the claim's own write, or never: no wait can change this.
            #expect(try await Self.calls(fixture).isEmpty)
            #expect(try await fixture.ledger.fulfilment(unbound.transactionId)?.appAccountToken == nil)
            #expect(try await Self.appleCalls(fixture) == 0)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func appleDownWhenTheClaimHappensKeepsTheCallQueuedUntilAppleIsBack(_ engine: LedgerEngine)
        async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            // Down for three tries: the retries wait 2, 4 and 8 s, room enough to look at the call while it waits.
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 3, "endpoint": "appAccountToken"])
            let purchase = try await Self.buy(fixture)
            #expect(try await Self.claim(fixture, purchase, account: Self.account).status == .ok, "the download does not wait for Apple")
            #expect(
                try await LifecycleTests.eventually(seconds: 30) {
                    let call = try await Self.calls(fixture).first
                    return call?.status == .queued && call?.attempts ?? 0 >= 1 && call?.lastError?.contains("503") == true
                })
            #expect(try await LifecycleTests.apple(fixture, purchase.transactionId)["appAccountToken"] == nil)
            let waiting = try #require(try await Self.calls(fixture).first)
            #expect(waiting.body == #"{"appAccountToken":"\#(Self.account.lowercased())"}"#, "the token waits with the call")
            // Apple is back after three failures: the call is sent, once.
            #expect(try await LifecycleTests.eventually(seconds: 90) { try await Self.calls(fixture).first?.status == .sent })
            let sent = try #require(try await Self.calls(fixture).first)
            #expect(sent.attempts == 3 && sent.lastError == nil)
            #expect(
                try await LifecycleTests.apple(fixture, purchase.transactionId)["appAccountToken"] as? String == Self.account.lowercased())
            #expect(try await Self.appleCalls(fixture) == 4)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aRefusalByAppleSettlesTheCallRefusedAndTheClaimStands(_ engine: LedgerEngine) async throws
    {
        try await DownloadFixture.run(engine: engine) { fixture in
            try await fixture.control.fault(["kind": "http-status", "status": 400, "count": 1, "endpoint": "appAccountToken"])
            let purchase = try await Self.buy(fixture)
            #expect(try await Self.claim(fixture, purchase, account: Self.account).status == .ok)
            #expect(try await LifecycleTests.eventually(seconds: 30) { try await Self.calls(fixture).first?.status == .refused })
            let refused = try #require(try await Self.calls(fixture).first)
            #expect(refused.attempts == 1 && refused.lastError?.contains("HTTP 400") == true, "\(refused.lastError ?? "")")
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.appAccountToken == Self.account.lowercased())
            #expect(try await LifecycleTests.apple(fixture, purchase.transactionId)["appAccountToken"] == nil)
            // Refused for good: not sent again.
            #expect(try await Self.appleCalls(fixture) == 1)
            #expect(try await fixture.ledger.leaseServerCalls(limit: 10, until: Date().addingTimeInterval(60), now: Date()).isEmpty)
        }
    }

    @Test(arguments: LedgerEngine.allCases) func aBadAccountIsRefusedAndChangesNothing(_ engine: LedgerEngine) async throws {
        try await DownloadFixture.run(engine: engine) { fixture in
            let purchase = try await Self.buy(fixture)
            let response = try await Self.claim(fixture, purchase, account: "account-42")
            #expect(response.status == .badRequest)
            #expect((try DownloadFixture.json(response)["error"] as? [String: Any])?["code"] as? String == "bad_request")
            #expect(try await fixture.settledSnapshot().isEmpty)
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery()).isEmpty)
            #expect(try await Self.appleCalls(fixture) == 0)
        }
    }

    @Test func withoutServerAPICredentialsAClaimBindsButQueuesNothing() async throws {
        try await DownloadFixture.run({ $0.serverAPICredentials = nil }) { fixture in
            let purchase = try await Self.buy(fixture)
            #expect(try await Self.claim(fixture, purchase, account: Self.account).status == .ok)
            #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.appAccountToken == Self.account.lowercased())
            #expect(try await fixture.ledger.serverCalls(ServerCallListQuery()).isEmpty)
        }
    }
}

/// Reads a JWS the simulator signed (tests only).
enum ServerAPIJWS {
    static func payload(_ jws: String) throws -> [String: Any] {
        let part = try #require(jws.split(separator: ".").dropFirst().first)
        let bytes = try #require(ByteEncoding.decodeBase64(part))
        let object = try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any]
        return try #require(object)
    }
}

import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomEntitlement
import StockroomTestSupport
import Testing

/// Two `refulfil --pending` runs at the same time, as two operator processes on one ledger
/// (two `Entitlements` on the same ledger, each with its own connections to the simulator),
/// verify each kept receipt once.
@Suite struct RefulfilPendingRaceTests {
    static func operatorRun(_ fixture: DownloadFixture) throws -> Entitlements {
        let client = VerifyReceiptClient(transport: CurlHTTPClient(), endpoints: .base(fixture.control.baseURL))
        return Entitlements(
            ledger: fixture.ledger,
            receipts: AppStoreReceiptVerifier(client: client, bundleID: "com.example.stockroom.demo", cacheInterval: .zero),
            signedTransactions: SignedTransactionVerifier(
                root: try AppleRootCertificates.rootCAG3(), bundleID: "com.example.stockroom.demo", environment: nil),
            serverAPI: nil, tokens: DownloadTokenSigner(key: Array(ServerFixture.tokenSecret.utf8)))
    }

    @Test func twoRunsAtOnceVerifyEachPendingReceiptOnce() async throws {
        try await DownloadFixture.run { fixture in
            var purchases: [SimulatorControl.Purchase] = []
            for _ in 0..<8 { purchases.append(try await fixture.control.purchase(DownloadFixture.book)) }
            try await fixture.control.fault(["kind": "http-status", "status": 503, "count": 1000])
            for purchase in purchases { #expect(try await fixture.post(purchase).status == .serviceUnavailable) }
            _ = try await fixture.control.client.execute(uri: "/sim/faults", method: .delete)
            #expect(try await fixture.ledger.pendingProofs(status: .pending, limit: 100).count == 8)

            let (first, second) = (try Self.operatorRun(fixture), try Self.operatorRun(fixture))
            let before = try await fixture.control.calls().total
            async let one = first.refulfilPending()
            async let two = second.refulfilPending()
            let results = try await one + two
            #expect(results.count == 8, "each kept receipt is taken by one run only")
            #expect(Set(results.map(\.transactionID)) == Set(purchases.map(\.transactionId)))
            #expect(results.allSatisfy { $0.kind == .verified })
            #expect(try await fixture.control.calls().total - before == 8, "one verifyReceipt call per kept receipt")
            for purchase in purchases { #expect(try await fixture.ledger.fulfilment(purchase.transactionId)?.state == .verified) }
        }
    }
}

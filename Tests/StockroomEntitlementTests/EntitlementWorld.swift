import Foundation
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomEntitlement

/// One run of the property test: a fresh ledger, the shared simulator, and what is true.
final class EntitlementWorld {
    static let products = ["com.example.cheap", "com.example.dear"]
    static let owner = "8f2e6a4c-0000-4000-8000-000000000001"

    struct Sale {
        var purchase: SimulatorControl.Purchase
        var account: String?
    }

    let control: SimulatorControl
    let ledger: any Ledger
    let entitlements: Entitlements
    private var sales: [Sale] = []
    /// The product Apple sold under each transaction ID.
    private var truth: [String: String] = [:]
    /// The transaction each genuine proof (by digest) was issued for.
    private var genuine: [String: String] = [:]
    private var outage = false

    init(control: SimulatorControl, root: Certificate, ledger: any Ledger) async throws {
        self.control = control
        self.ledger = ledger
        let client = VerifyReceiptClient(
            transport: CurlHTTPClient(), endpoints: .base(control.baseURL),
            policy: RetryPolicy(
                maximumAttempts: 2, initialBackoff: .milliseconds(1), maximumBackoff: .milliseconds(2), totalBudget: .seconds(2)))
        entitlements = Entitlements(
            ledger: ledger, receipts: AppStoreReceiptVerifier(client: client, bundleID: "com.example.stockroom.demo", cacheInterval: .zero),
            signedTransactions: SignedTransactionVerifier(root: root, bundleID: "com.example.stockroom.demo", environment: nil),
            serverAPI: nil, tokens: DownloadTokenSigner(key: Array("property-test-secret-0123456789abcdef".utf8)))
        _ = try await control.client.execute(uri: "/sim/faults", method: .delete)
    }

    /// Applies the step `code` encodes, then checks the rules.
    func step(_ code: Int) async throws {
        let before = try await states()
        var lifts = false
        if sales.isEmpty { try await buy(code) }
        let sale = sales[(code / 10) % sales.count]
        switch code % 10 {
        case 0:
            try await buy(code)
        case 1, 2, 3:
            try await claim(sale, code: code)
        case 4:
            outage.toggle()
            if outage {
                try await control.fault(["kind": "http-status", "status": 503, "count": 100_000])
            } else {
                _ = try await control.client.execute(uri: "/sim/faults", method: .delete)
            }
        case 5:
            try await control.refund(sale.purchase.transactionId)
            _ = try await entitlements.apply(notification: try await notification("REFUND", sale))
        case 6:
            lifts = true
            _ = try await entitlements.apply(notification: try await notification("REFUND_REVERSED", sale))
        case 7:
            _ = try? await entitlements.revoke(sale.purchase.transactionId, reason: "property test")
        case 8:
            lifts = true
            _ = try? await entitlements.reinstate(sale.purchase.transactionId, reason: "property test")
        default:
            if (code / 10) % 2 == 0 {
                _ = try? await entitlements.refulfil(sale.purchase.transactionId)
            } else {
                _ = try await entitlements.refulfilPending()
            }
        }
        try await checkRules(before: before, liftsAllowed: lifts, step: code)
    }

    private func buy(_ code: Int) async throws {
        let product = Self.products[(code / 10) % 2]
        var fields = ["productId": product]
        let account = (code / 20) % 2 == 1 ? Self.owner : nil
        if let account { fields["appAccountToken"] = account }
        let purchase = try await control.purchase(fields)
        sales.append(Sale(purchase: purchase, account: account))
        truth[purchase.transactionId] = product
        genuine[try #require(ReceiptProof.parse(purchase.receiptData)).digest] = purchase.transactionId
        genuine[VerifiedProof.digest(of: purchase.signedTransaction)] = purchase.transactionId
    }

    private func claim(_ sale: Sale, code: Int) async throws {
        let purchase = sale.purchase
        let variant = (code / 100) % 6
        let rightProduct = (code / 1000) % 3 != 0
        let product = rightProduct ? purchase.productId : Self.products.first { $0 != purchase.productId }!
        let account = (code / 3000) % 2 == 0 ? sale.account : nil
        var transactionID: String? = purchase.transactionId
        let proof: PresentedProof
        switch variant {
        case 0: proof = .receipt(purchase.receiptData)
        case 1: proof = .receipt(" " + String(purchase.receiptData.prefix(30)) + "\n" + String(purchase.receiptData.dropFirst(30)) + "\t")
        case 2: proof = .receipt(ByteEncoding.base64((0..<64).map { UInt8(truncatingIfNeeded: $0 &* code) }))
        case 3: proof = .receipt(sales[(code / 7) % sales.count].purchase.receiptData)
        case 4: proof = .signedTransaction(purchase.signedTransaction)
        default:
            proof = .receipt(purchase.receiptData)
            transactionID = nil
        }
        let request = EntitlementRequest(
            productID: product, transactionID: transactionID, proof: proof, appAccountToken: account, client: "127.0.0.1")
        guard case .entitled(let row, _) = try await entitlements.judge(request) else { return }
        // No unverified proof ever authorises bytes, and only for what it bought.
        let digest: String
        switch proof {
        case .receipt(let text): digest = try #require(ReceiptProof.parse(text), "garbage authorised bytes (step \(code))").digest
        case .signedTransaction(let jws): digest = VerifiedProof.digest(of: jws)
        }
        #expect(genuine[digest] == row.transactionID, "a proof authorised another transaction (step \(code))")
        #expect(truth[row.transactionID] == product, "bytes of another product than bought (step \(code))")
        if let bound = row.appAccountToken { #expect(account == bound, "a claim without the bound account was served (step \(code))") }
        #expect(row.state.isEntitled)
    }

    private func notification(_ type: String, _ sale: Sale) async throws -> String {
        let response = try await control.client.execute(
            uri: "/sim/notifications", method: .post,
            body: ByteBuffer(
                bytes: try JSONSerialization.data(withJSONObject: ["type": type, "transactionId": sale.purchase.transactionId])))
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        return try #require(object?["signedPayload"] as? String)
    }

    private func states() async throws -> [String: FulfilmentState] {
        Dictionary(uniqueKeysWithValues: try await ledger.list(FulfilmentListQuery(limit: 100_000)).map { ($0.transactionID, $0.state) })
    }

    /// The product rule and the revocation rule over every row.
    private func checkRules(before: [String: FulfilmentState], liftsAllowed: Bool, step: Int) async throws {
        for row in try await ledger.list(FulfilmentListQuery(limit: 100_000)) {
            #expect(
                truth[row.transactionID] == row.productID, "row \(row.transactionID) records another product than Apple sold (step \(step))"
            )
            if before[row.transactionID] == .revoked, row.state != .revoked {
                #expect(liftsAllowed, "\(row.transactionID) came back from revoked without reinstate or REFUND_REVERSED (step \(step))")
            }
        }
    }
}

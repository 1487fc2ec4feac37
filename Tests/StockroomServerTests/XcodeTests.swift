import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `--accept-xcode`: StoreKit Testing in Xcode's signed transactions and receipts, verified
/// locally, through a live server (the simulator stands by as the configured upstream).
@Suite struct XcodeTests {
    static let book = "com.example.book"
    static let bundle = "com.example.stockroom.demo"

    @Test func anXcodeSignedTransactionIsAcceptedWithTheFlagWithoutAskingUpstream() async throws {
        let xcode = try XcodeArtefacts()
        try await DownloadFixture.run({ $0.acceptsXcode = true }) { fixture in
            let response = try await fixture.post([
                "productId": Self.book, "signedTransaction": try xcode.signedTransaction(product: Self.book, id: "0"),
            ])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(try await fixture.control.serverAPICalls() == 0, "Xcode's transactions are unknown upstream: nothing is asked")
            #expect(try await fixture.ledger.fulfilment("0")?.environment == .sandbox)
        }
    }

    @Test func withoutTheFlagXcodeArtefactsAreRefusedAsBefore() async throws {
        let xcode = try XcodeArtefacts()
        try await DownloadFixture.run { fixture in
            let signed = try await fixture.post([
                "productId": Self.book, "signedTransaction": try xcode.signedTransaction(product: Self.book, id: "0"),
            ])
            #expect(signed.status == .forbidden)
            #expect(try DownloadFixture.code(signed) == "jws_malformed")
            let receipt = try await fixture.post([
                "productId": Self.book, "receiptData": try xcode.receipt(product: Self.book, id: "0"), "transactionId": "0",
            ])
            #expect(receipt.status == .forbidden)
            #expect(try await fixture.snapshot().isEmpty)
        }
    }

    @Test func aTamperedOneAnotherEnvironmentAndAnUnpinnedCertificateAreRefused() async throws {
        let xcode = try XcodeArtefacts()
        let stranger = try XcodeArtefacts()
        try await DownloadFixture.run({
            $0.acceptsXcode = true; $0.xcodeCertificate = xcode.certificate
        }) { fixture in
            var parts = try xcode.signedTransaction(product: "com.example.big", id: "0").split(separator: ".").map(String.init)
            parts[1] = try xcode.payload(product: Self.book, id: "0")
            let tampered = try await fixture.post(["productId": Self.book, "signedTransaction": parts.joined(separator: ".")])
            #expect(tampered.status == .forbidden)
            #expect(try DownloadFixture.code(tampered) == "jws_bad_signature")
            let production = try await fixture.post([
                "productId": Self.book,
                "signedTransaction": try xcode.signedTransaction(product: Self.book, id: "0", environment: "Production"),
            ])
            #expect(production.status == .forbidden)
            #expect(try DownloadFixture.code(production) == "jws_malformed", "one self-signed certificate never vouches for Production")
            let unpinned = try await fixture.post([
                "productId": Self.book, "signedTransaction": try stranger.signedTransaction(product: Self.book, id: "0"),
            ])
            #expect(try DownloadFixture.code(unpinned) == "jws_bad_chain")
            let strangersReceipt = try await fixture.post([
                "productId": Self.book, "receiptData": try stranger.receipt(product: Self.book, id: "0"), "transactionId": "0",
            ])
            #expect(try DownloadFixture.code(strangersReceipt) == "receipt_not_authentic")
            #expect(try await fixture.snapshot().isEmpty, "refusals change nothing")
        }
    }

    @Test func anXcodeReceiptIsVerifiedLocallyAndATamperedOneIsNot() async throws {
        let xcode = try XcodeArtefacts()
        try await DownloadFixture.run({ $0.acceptsXcode = true }) { fixture in
            let receipt = try xcode.receipt(product: Self.book, id: "7")
            var bytes = try #require(ByteEncoding.decodeBase64(receipt))
            let product = Array(Self.book.utf8)
            let at = try #require((0...(bytes.count - product.count)).first { Array(bytes[$0..<$0 + product.count]) == product })
            bytes[at + product.count - 1] = UInt8(ascii: "m")  // com.example.boom
            let tampered = try await fixture.post(["productId": Self.book, "receiptData": ByteEncoding.base64(bytes), "transactionId": "7"])
            #expect(tampered.status == .forbidden)
            #expect(try DownloadFixture.code(tampered) == "receipt_not_authentic")
            #expect(try await fixture.snapshot().isEmpty)

            let before = try await fixture.control.calls()
            let response = try await fixture.post(["productId": Self.book, "receiptData": receipt, "transactionId": "7"])
            #expect(response.status == .ok)
            #expect(Array(buffer: response.body) == ServerFixture.book)
            #expect(try await fixture.control.calls() == before, "verifyReceipt is not asked")
        }
    }

    @Test func acceptXcodeWithAppleAsUpstreamRefusesToStart() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = .apple
        fixture.configuration.acceptsXcode = true
        await #expect(throws: StartupError.self) { _ = try await fixture.application() }
    }
}

/// What StoreKit Testing in Xcode makes, minted with a throwaway self-signed key (never saved).
struct XcodeArtefacts {
    let key: ECPrivateKey
    let certificate: Certificate

    init() throws {
        key = try ECPrivateKey()
        certificate = try Certificate.issue(
            commonName: "StoreKit Testing in Xcode", subjectKey: key, issuer: nil, isAuthority: true,
            notBefore: Date().addingTimeInterval(-86_400), notAfter: Date().addingTimeInterval(86_400 * 365))
    }

    func payload(product: String, id: String, environment: String = "Xcode") throws -> String {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let object: [String: Any] = [
            "transactionId": id, "originalTransactionId": id, "productId": product, "bundleId": XcodeTests.bundle,
            "purchaseDate": now, "signedDate": now, "environment": environment, "type": "Non-Consumable", "quantity": 1,
        ]
        return ByteEncoding.base64URL(Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
    }

    func signedTransaction(product: String, id: String, environment: String = "Xcode") throws -> String {
        let header: [String: Any] = ["alg": "ES256", "kid": "Apple_Xcode_Key", "x5c": [ByteEncoding.base64(certificate.der)]]
        let input =
            ByteEncoding.base64URL(Array(try JSONSerialization.data(withJSONObject: header))) + "."
            + (try payload(product: product, id: id, environment: environment))
        return input + "." + ByteEncoding.base64URL(try key.sign(Array(input.utf8)))
    }

    func receipt(product: String, id: String) throws -> String {
        let receipt = AppReceipt(
            receiptType: "Xcode", bundleID: XcodeTests.bundle, appVersion: "1", opaqueValue: Array("xcode-device".utf8),
            creationDate: Date(),
            purchases: [
                AppReceipt.Purchase(
                    quantity: 1, productID: product, transactionID: id, purchaseDate: Date(), originalTransactionID: id,
                    cancellationDate: nil)
            ])
        return ByteEncoding.base64(try SignedData.sign(receipt.encodedPayload(), signer: certificate, key: key, chain: []))
    }
}

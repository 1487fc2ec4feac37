import AppStoreSimulator
import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomCore

/// Receipts normalised and classified before anything is asked upstream: whitespace and
/// base64url variants share one digest, and what is no receipt never reaches Apple.
@Suite struct ReceiptProofTests {
    static let chain = try! SigningChain()

    static func appReceiptText() throws -> String {
        ByteEncoding.base64(try chain.signReceipt(payload: ReceiptParserTests.receipt(created: Date()).encodedPayload()))
    }

    /// Six ways a client or a proxy mangles one receipt.
    static func variants(of text: String) -> [String] {
        let broken = stride(from: 0, to: text.count, by: 64).map { start -> String in
            let lower = text.index(text.startIndex, offsetBy: start)
            return String(text[lower..<(text.index(lower, offsetBy: 64, limitedBy: text.endIndex) ?? text.endIndex)])
        }
        let url = String(text.map { $0 == "+" ? "-" : $0 == "/" ? "_" : $0 }).replacingOccurrences(of: "=", with: "")
        return [
            text, " \(text) ", broken.joined(separator: "\n"), broken.joined(separator: "\r\n"), "\t" + broken.joined(separator: " \t "),
            url,
        ]
    }

    @Test func whitespaceAndBase64URLVariantsOfOneReceiptShareOneDigest() throws {
        let text = try Self.appReceiptText()
        let proofs = Self.variants(of: text).map(ReceiptProof.parse)
        #expect(proofs.allSatisfy { $0 != nil })
        #expect(Set(proofs.compactMap { $0?.digest }).count == 1)
        #expect(proofs.allSatisfy { $0?.text == text })
        #expect(proofs[0]?.digest == ByteEncoding.hex(SHA256.hash(Array(text.utf8))))
    }

    @Test func anAppReceiptIsClassifiedWithItsClaims() throws {
        let proof = try #require(ReceiptProof.parse(try Self.appReceiptText()))
        #expect(proof.kind == .appReceipt)
        #expect(proof.claimedBundleID == "com.example.stockroom.demo")
        #expect(proof.claimedEnvironment == .sandbox)
        #expect(proof.claims.map(\.transactionID) == ["2000000000000000", "2000000000000001"])
        #expect(proof.claims.first?.productID == "com.example.stockroom.demo.book0")
        #expect(proof.latestClaim(of: "com.example.stockroom.demo.book1")?.transactionID == "2000000000000001")
    }

    @Test(arguments: [
        "", "   ", "AAAA", "%%%", "not base64 at all!", ByteEncoding.base64(Array("not a receipt".utf8)),
        ByteEncoding.base64([0x30, 0x80, 0x06, 0x09]), "{ \"purchase-info\" = \"x\"; }",
        ByteEncoding.base64(Array("{ \"purchase-info\" = \"garbage\"; }".utf8)),
    ])
    func whatIsNoReceiptIsRefused(text: String) {
        #expect(ReceiptProof.parse(text) == nil)
    }

    @Test func randomBytesAndOversizedInputAreRefused() throws {
        var generator = SystemRandomNumberGenerator()
        for _ in 0..<500 {
            let bytes = (0..<Int.random(in: 1...400, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            #expect(ReceiptProof.parse(ByteEncoding.base64(bytes)) == nil)
        }
        let valid = try Self.appReceiptText()
        #expect(ReceiptProof.parse(valid + String(repeating: " ", count: ReceiptProof.maximumLength)) == nil)
    }

    @Test func whitespaceVariantsCostOneUpstreamCallAndGarbageNone() async throws {
        try await VerifyReceiptClientTests.withSimulator(cacheInterval: .seconds(60)) { control, verifier in
            let purchase = try await control.purchase()
            for variant in Self.variants(of: purchase.receiptData) {
                let verdict = await verifier.verify(
                    VerificationRequest(receiptData: variant, productID: VerifyReceiptClientTests.book), freshness: .cachedAllowed)
                guard case .valid = verdict else { Issue.record("\(verdict)"); return }
            }
            let calls = try await control.calls().total
            #expect(calls == 1)

            var generator = SystemRandomNumberGenerator()
            for _ in 0..<40 {
                let random = ByteEncoding.base64((0..<120).map { _ in UInt8.random(in: 0...255, using: &generator) })
                #expect(
                    await verifier.verify(VerificationRequest(receiptData: random), freshness: .upstreamOnly) == .invalid(.malformedReceipt)
                )
            }
            let callsAfterGarbage = try await control.calls().total
            #expect(callsAfterGarbage == 1, "garbage is refused locally")
        }
    }

    @Test func concurrentVariantsShareOneFlight() async throws {
        try await VerifyReceiptClientTests.withSimulator({ $0.latency = .milliseconds(300) }) { control, verifier in
            let purchase = try await control.purchase()
            let proofs = Self.variants(of: purchase.receiptData).compactMap(ReceiptProof.parse)
            #expect(proofs.count == 6)
            await withTaskGroup(of: Void.self) { group in
                for proof in proofs {
                    group.addTask {
                        let verdict = await verifier.verify(
                            proof, productID: VerifyReceiptClientTests.book, transactionID: nil, freshness: .upstreamOnly)
                        if case .valid = verdict {} else { Issue.record("\(verdict)") }
                    }
                }
            }
            let calls = try await control.calls().total
            #expect(calls == 1)
        }
    }
}

import AppStoreSimulator
import Foundation
import Testing
@testable import StockroomCore

/// App receipts read locally with OpenSSL: PKCS#7 in BER, Apple's ASN.1 payload, the chain at
/// the receipt's creation date.
@Suite struct ReceiptParserTests {
    static let chain = try! SigningChain()
    static let year: TimeInterval = 365 * 86400

    static func receipt(created: Date = Date(timeIntervalSince1970: 1_790_000_000), purchases: Int = 2) -> AppReceipt {
        AppReceipt(
            receiptType: "ProductionSandbox", bundleID: "com.example.stockroom.demo", appVersion: "1.2",
            opaqueValue: Array("device-1".utf8),
            creationDate: created,
            purchases: (0..<purchases).map { index in
                AppReceipt.Purchase(
                    quantity: 1, productID: "com.example.stockroom.demo.book\(index)", transactionID: "200000000000000\(index)",
                    purchaseDate: Date(timeIntervalSince1970: 1_789_000_000 + Double(index)), originalTransactionID: "2000000000000000",
                    cancellationDate: index == 1 ? Date(timeIntervalSince1970: 1_789_500_000) : nil)
            })
    }

    @Test func aSignedReceiptRoundTripsAndVerifiesAgainstItsRoot() throws {
        let original = Self.receipt(created: Date(timeIntervalSince1970: floor(Date().timeIntervalSince1970)))
        let signed = try Self.chain.signReceipt(payload: original.encodedPayload())
        #expect(signed.starts(with: [0x30, 0x80]), "BER with an indefinite length, as Xcode writes")
        let inspection = try ReceiptInspection.inspect(base64: ByteEncoding.base64(signed), root: Self.chain.root).get()
        #expect(inspection.receipt == original)
        #expect(inspection.isSignatureVerified)
        #expect(inspection.receipt.purchases[1].cancellationDate != nil)
    }

    @Test func aReceiptSignedUnderAnotherRootIsReadButReportedUnverified() throws {
        let signed = try Self.chain.signReceipt(payload: Self.receipt(created: Date()).encodedPayload())
        let inspection = try ReceiptInspection.inspect(base64: ByteEncoding.base64(signed), root: try AppleRootCertificates.incRoot()).get()
        #expect(inspection.receipt.bundleID == "com.example.stockroom.demo")
        #expect(!inspection.isSignatureVerified)
    }

    @Test func certificateValidityIsJudgedAtTheCreationDate() throws {
        let now = Date()
        let rootKey = try ECPrivateKey(), leafKey = try ECPrivateKey()
        let root = try Certificate.issue(
            commonName: "Root", subjectKey: rootKey, issuer: nil, isAuthority: true, notBefore: now - 5 * Self.year,
            notAfter: now + 5 * Self.year)
        let leaf = try Certificate.issue(
            commonName: "Receipt Signing", subjectKey: leafKey, issuer: (root, rootKey), isAuthority: false,
            notBefore: now - 4 * Self.year, notAfter: now - 2 * Self.year)
        let genuineThen = try SignedData.sign(
            Self.receipt(created: now - 3 * Self.year).encodedPayload(), signer: leaf, key: leafKey, chain: [])
        #expect(try ReceiptInspection.inspect(base64: ByteEncoding.base64(genuineThen), root: root).get().isSignatureVerified)
        let claimedNow = try SignedData.sign(Self.receipt(created: now).encodedPayload(), signer: leaf, key: leafKey, chain: [])
        let problem = try ReceiptInspection.inspect(base64: ByteEncoding.base64(claimedNow), root: root).get().signatureProblem
        // OpenSSL's CMS layer reports only "certificate verify error"; what matters is the refusal.
        #expect(problem != nil, "a receipt created after its certificate expired does not verify")
    }

    @Test func garbageIsRefusedWithItsReason() throws {
        #expect(ReceiptInspection.inspect(base64: "%%%", root: Self.chain.root) == .failure(.notBase64))
        #expect(
            ReceiptInspection.inspect(base64: ByteEncoding.base64(Array("not a receipt".utf8)), root: Self.chain.root)
                == .failure(.notSignedData))
        let notAReceipt = try Self.chain.signReceipt(payload: Array("hello".utf8))
        #expect(ReceiptInspection.inspect(base64: ByteEncoding.base64(notAReceipt), root: Self.chain.root) == .failure(.malformedPayload))
        let noBundle = DERWriter.set([DERWriter.attribute(3, DERWriter.utf8("1"))])
        #expect(AppReceipt.decode(payload: noBundle) == nil)
    }

    /// 10,000 random and mutated receipts and payloads: refused or read, never a crash.
    @Test func randomAndMutatedReceiptsNeverCrash() async throws {
        let signed = try Self.chain.signReceipt(payload: Self.receipt(created: Date()).encodedPayload())
        let payload = Self.receipt().encodedPayload()
        var generator = SystemRandomNumberGenerator()
        func mutate(_ bytes: [UInt8]) -> [UInt8] {
            var out = bytes
            for _ in 0..<Int.random(in: 1...6, using: &generator) where !out.isEmpty {
                let index = Int.random(in: 0..<out.count, using: &generator)
                switch Int.random(in: 0..<4, using: &generator) {
                case 0: out[index] = UInt8.random(in: 0...255, using: &generator)
                case 1: out.remove(at: index)
                case 2: out.insert(UInt8.random(in: 0...255, using: &generator), at: index)
                default: out = Array(out.prefix(index))
                }
            }
            return out
        }
        var verifiedMutants = 0
        for round in 0..<10_000 {
            if round.isMultiple(of: 100) { await Task.yield() }
            switch round % 3 {
            case 0:
                if case .success(let inspection) = ReceiptInspection.inspect(
                    base64: ByteEncoding.base64(mutate(signed)), root: Self.chain.root),
                    inspection.isSignatureVerified
                {
                    verifiedMutants += 1
                }
            case 1:
                _ = AppReceipt.decode(payload: mutate(payload))
            default:
                let random = (0..<Int.random(in: 0...300, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
                _ = ReceiptInspection.inspect(base64: ByteEncoding.base64(random), root: Self.chain.root)
                _ = AppReceipt.decode(payload: random)
            }
        }
        // A mutation that survives verification can only touch unsigned bytes (e.g. a truncated tail).
        #expect(verifiedMutants < 34, "at most 1% of mutants verify")
    }
}

import AppStoreSimulator
import Foundation
import Testing
@testable import StockroomCore

/// Issue 8 item 1: numbers from outside that once trapped the process (`Double value cannot be
/// converted to Int`) are refused as malformed instead. A trap kills the test process, so each
/// of these fails on the code before the fix by crashing, not by a wrong answer.
@Suite struct HostileNumberTests {
    static let bundle = "com.example.stockroom.demo"
    static let chain = try! SigningChain()

    /// `signedDate` values, written into the JSON text as they are (not through a Double).
    static let hostileSignedDates = [
        "1e30", "-1e30", "1e300", "-1e300", "9.3e18", "-9.3e18", "9223372036854775808", "18446744073709551616",
        "99999999999999999999999999999999", "-1", "4102444800001", "\"9223372036854775808\"", "\"1e30\"", "null",
    ]

    /// A JWS shaped as in the issue: any DER certificate three times in `x5c`, 64 arbitrary
    /// signature bytes, and `payloadJSON` as the payload.
    static func forgedJWS(payloadJSON: String) -> String {
        let certificate = ByteEncoding.base64(chain.leaf.der)
        let header = "{\"alg\":\"ES256\",\"x5c\":[\"\(certificate)\",\"\(certificate)\",\"\(certificate)\"]}"
        let signature = [UInt8](repeating: 0xA5, count: 64)
        return [Array(header.utf8), Array(payloadJSON.utf8), signature].map(ByteEncoding.base64URL).joined(separator: ".")
    }

    static func transactionJSON(signedDate: String) -> String {
        """
        {"transactionId":"2000000000000001","originalTransactionId":"2000000000000001","productId":"com.example.stockroom.demo.book1",\
        "bundleId":"\(bundle)","purchaseDate":1790000000000,"type":"Non-Consumable","environment":"Production","signedDate":\(signedDate)}
        """
    }

    static func isMalformed<T>(_ result: Result<T, JWSFailure>) -> Bool {
        if case .failure(.malformed) = result { return true }
        return false
    }

    @Test(arguments: hostileSignedDates)
    func aForgedJWSWithAHostileSignedDateIsMalformed(signedDate: String) {
        let jws = Self.forgedJWS(payloadJSON: Self.transactionJSON(signedDate: signedDate))
        #expect(Self.isMalformed(JWSVerifier(root: Self.chain.root).verify(jws, as: SignedTransaction.self)))
        let transactions = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil)
        #expect(Self.isMalformed(transactions.verify(jws)))
    }

    @Test(arguments: hostileSignedDates)
    func aGenuinelySignedJWSWithAHostileSignedDateIsMalformed(signedDate: String) throws {
        let jws = try Self.chain.sign(payload: Array(Self.transactionJSON(signedDate: signedDate).utf8))
        #expect(Self.isMalformed(JWSVerifier(root: Self.chain.root).verify(jws, as: SignedTransaction.self)))
    }

    @Test(arguments: ["1e30", "-1e30", "1e300", "9.3e18"])
    func aNotificationWithAHostileSignedDateIsMalformed(signedDate: String) throws {
        let transactions = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil)
        let notification = """
            {"notificationType":"REFUND","notificationUUID":"5f2c0000-0000-4000-8000-000000000001","signedDate":\(signedDate),\
            "data":{"bundleId":"\(Self.bundle)"}}
            """
        #expect(Self.isMalformed(AppStoreNotification.verify(Self.forgedJWS(payloadJSON: notification), with: transactions)))
        let signed = try Self.chain.sign(payload: Array(notification.utf8))
        #expect(Self.isMalformed(AppStoreNotification.verify(signed, with: transactions)))
    }

    @Test func aSignedDateInsideTheRangeStillVerifies() throws {
        let now = (Date().timeIntervalSince1970 * 1000).rounded()
        let jws = try Self.chain.sign(payload: Array(Self.transactionJSON(signedDate: "\(Int64(now))").utf8))
        #expect(throws: Never.self) { try JWSVerifier(root: Self.chain.root).verify(jws, as: SignedTransaction.self).get() }
    }

    @Test(arguments: [1e30, -1e30, 1e300, .infinity, -.infinity, .nan, 9.3e18, 253_402_300_800, -62_135_596_801])
    func aTimeOpenSSLCannotHoldIsRefusedNotTrapped(seconds: Double) throws {
        let time = Date(timeIntervalSince1970: seconds)
        #expect(CertificateTime.seconds(time) == nil)
        let problem = CertificateChain.problem(
            leaf: Self.chain.leaf, intermediates: [Self.chain.intermediate], root: Self.chain.root, at: time)
        #expect(problem == "the verification time is outside the years 1 to 9999")
        let receipt = try Self.chain.signReceipt(payload: [0x31, 0x00])
        #expect(
            SignedData.problem(verifying: receipt, root: Self.chain.root, at: time)
                == "the verification time is outside the years 1 to 9999")
        let key = try ECPrivateKey()
        #expect(throws: CryptoError.self) {
            try Certificate.issue(commonName: "x", subjectKey: key, issuer: nil, isAuthority: true, notBefore: Date(), notAfter: time)
        }
    }

    @Test func theYearsCertificatesCanHoldConvert() {
        #expect(CertificateTime.seconds(Date(timeIntervalSince1970: 253_402_300_799)) == 253_402_300_799)
        #expect(CertificateTime.seconds(Date(timeIntervalSince1970: -62_135_596_800)) == -62_135_596_800)
        #expect(CertificateTime.seconds(Date(timeIntervalSince1970: 1_790_000_000.75)) == 1_790_000_000)
    }
}

import AppStoreSimulator
import Foundation
import Testing
@testable import StockroomCore

/// Issue 19: Apple's JSON read through types, no stricter reader beside a looser one. A repeated
/// key is refused wherever it is (JSONDecoder keeps the first value where JSONSerialization kept
/// the last), a value Apple adds to an enumeration is kept, and a boolean is no number.
@Suite struct UpstreamJSONTests {
    static let bundle = "com.example.stockroom.demo"
    static let chain = try! SigningChain()

    @Test(arguments: [
        #"{"a":1,"a":2}"#, #"{"a":1,"\u0061":2}"#, #"{"a":[1,{"b":1,"b":2}]}"#, #"{"x":{"a":1},"y":2,"x":3}"#, #" { "a" : 1 , "a" : 1 } "#,
    ])
    func aRepeatedKeyIsFound(json: String) {
        #expect(UpstreamJSON.hasDuplicateKey(Array(json.utf8)))
        #expect(UpstreamJSON.decode([String: Int].self, from: Array(json.utf8)) == nil)
    }

    @Test(arguments: [
        #"{"a":{"a":1}}"#, #"[{"a":1},{"a":1}]"#, #"{"a":"a","b":"a"}"#, #"{"a":"\",\"a\":","b":1}"#, #"{"a\\":1,"a":2}"#, "[]", "{}",
        #""a""#,
    ])
    func keysThatOnlyLookAlikeAreNoRepeat(json: String) {
        #expect(!UpstreamJSON.hasDuplicateKey(Array(json.utf8)))
    }

    static func transactionJSON(_ extra: String = "") -> String {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        return """
            {"transactionId":"2000000000000001","originalTransactionId":"2000000000000001","productId":"com.example.stockroom.demo.book1",\
            "bundleId":"\(bundle)","purchaseDate":\(now),"type":"Non-Consumable","environment":"Production","signedDate":\(now)\(extra)}
            """
    }

    @Test(arguments: [#","bundleId":"com.example.other""#, #","signedDate":1"#, #","transactionId":"1""#])
    func aSignedTransactionThatRepeatsAKeyIsMalformed(extra: String) throws {
        let verifier = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil)
        #expect(throws: Never.self) { try verifier.verify(try Self.chain.sign(payload: Array(Self.transactionJSON().utf8))).get() }
        guard case .failure(.malformed) = verifier.verify(try Self.chain.sign(payload: Array(Self.transactionJSON(extra).utf8))) else {
            Issue.record("a payload naming a key twice was read")
            return
        }
    }

    @Test func aHeaderThatRepeatsAKeyIsMalformed() throws {
        let jws = try Self.chain.sign(payload: Array(Self.transactionJSON().utf8))
        let parts = jws.split(separator: ".")
        let header = String(decoding: ByteEncoding.decodeBase64(parts[0]) ?? [], as: UTF8.self)
        let repeated = ByteEncoding.base64URL(Array(header.replacingOccurrences(of: "{", with: #"{"alg":"none","#).utf8))
        let verifier = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil, chains: nil)
        #expect(
            verifier.verify([repeated, String(parts[1]), String(parts[2])].joined(separator: "."))
                == .failure(.malformed("the header is not base64url JSON")))
    }

    @Test func valuesAppleAddsLaterAreKeptAsSent() throws {
        #expect(NotificationType("ONE_TIME_CHARGE") == .oneTimeCharge)
        #expect(NotificationType("SOMETHING_NEW") == .unrecognized("SOMETHING_NEW"))
        #expect(NotificationType("SOMETHING_NEW").rawValue == "SOMETHING_NEW")
        #expect(PayloadEnvironment("LocalTesting") == .localTesting)
        #expect(PayloadEnvironment("Staging").storeEnvironment == nil)
        #expect(RevocationType("REFUND_PRORATED") == .refundProrated)
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let payload = """
            {"notificationType":"SOMETHING_NEW","subtype":"ALSO_NEW","notificationUUID":"5f2c0000-0000-4000-8000-000000000009",\
            "signedDate":\(now),"data":{"bundleId":"\(Self.bundle)"}}
            """
        let verifier = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil)
        let notification = try AppStoreNotification.verify(try Self.chain.sign(payload: Array(payload.utf8)), with: verifier).get()
        #expect(notification.notificationType == .unrecognized("SOMETHING_NEW"))
        #expect(notification.subtype == .unrecognized("ALSO_NEW"))
        #expect(notification.transaction == nil)
    }

    @Test func aNotificationsTransactionIsVerifiedOnceAndMakesItsProofWithoutAnother() throws {
        let cache = VerifiedChainCache()
        let verifier = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil, chains: cache)
        let info = try Self.chain.sign(payload: Array(Self.transactionJSON().utf8))
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let payload = """
            {"notificationType":"ONE_TIME_CHARGE","notificationUUID":"5f2c0000-0000-4000-8000-000000000010","signedDate":\(now),\
            "data":{"bundleId":"\(Self.bundle)","signedTransactionInfo":"\(info)"}}
            """
        let notification = try AppStoreNotification.verify(try Self.chain.sign(payload: Array(payload.utf8)), with: verifier).get()
        let verified = try #require(notification.verifiedTransaction)
        let proof = try VerifiedProof.verifying(verified).get()
        #expect(proof.proof == info && proof.transactionID == "2000000000000001")
        let lookups = cache.statistics
        #expect(lookups.hits + lookups.misses == 2, "the notification and its transaction, each once: \(lookups)")
    }

    @Test func anAppleErrorCodeIsAnIntegerOrNothing() {
        func code(_ json: String) -> Int? { AppleErrorBody.of(Array(json.utf8))?.errorCode }
        #expect(code(#"{"errorCode":4040010,"errorMessage":"x"}"#) == 4_040_010)
        #expect(code(#"{"errorCode":4040010.0}"#) == 4_040_010)
        for hostile in ["true", "1e30", "4.5", #""4040010""#, "null", "[1]"] {
            #expect(code(#"{"errorCode":\#(hostile),"errorMessage":"x"}"#) == nil, "\(hostile)")
        }
        #expect(AppStoreServerAPIClient.appleError(in: Array(#"{"errorCode":true,"errorMessage":"kept"}"#.utf8)).message == "kept")
    }
}

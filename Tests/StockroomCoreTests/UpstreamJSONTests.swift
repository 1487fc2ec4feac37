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

    /// RESCIND_CONSENT's `appData` carries a signed app transaction: verified like a transaction
    /// (chain, signature, bundle, environment); one that fails refuses the whole notification.
    @Test func aRescissionsAppTransactionIsVerifiedAndRefusedWhenItIsNotThisApps() throws {
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        func notification(app: [String: Any], signer: SigningChain = Self.chain) throws -> String {
            let info = try signer.sign(payload: Array(try JSONSerialization.data(withJSONObject: app)))
            let payload: [String: Any] = [
                "notificationType": "RESCIND_CONSENT", "notificationUUID": "5f2c0000-0000-4000-8000-000000000011", "signedDate": now,
                "appData": ["bundleId": Self.bundle, "environment": "Sandbox", "signedAppTransactionInfo": info],
            ]
            return try Self.chain.sign(payload: Array(try JSONSerialization.data(withJSONObject: payload)))
        }
        let app: [String: Any] = [
            "appTransactionId": 704_000_000_000_123, "bundleId": Self.bundle, "receiptType": "Sandbox", "signedDate": now,
        ]
        let verifier = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: nil, chains: nil)
        func failure(_ result: Result<AppStoreNotification, JWSFailure>) -> JWSFailure? {
            if case .failure(let failure) = result { return failure }
            return nil
        }
        let verified = try AppStoreNotification.verify(try notification(app: app), with: verifier).get()
        #expect(verified.verifiedAppTransaction?.payload.appTransactionId == "704000000000123")
        #expect(verified.verifiedAppTransaction?.payload.environment == .sandbox)
        #expect(verified.transaction == nil)
        var other = app
        other["bundleId"] = "com.example.other"
        #expect(
            failure(AppStoreNotification.verify(try notification(app: other), with: verifier))
                == .wrongBundle(expected: Self.bundle, actual: "com.example.other"))
        let production = SignedTransactionVerifier(root: Self.chain.root, bundleID: Self.bundle, environment: .production, chains: nil)
        #expect(failure(AppStoreNotification.verify(try notification(app: app), with: production))?.code == "environment_mismatch")
        #expect(failure(AppStoreNotification.verify(try notification(app: app, signer: try SigningChain()), with: verifier)) != nil)
        for hostile: Any in ["", String(repeating: "7", count: 65), ["nested"]] {
            var bad = app
            bad["appTransactionId"] = hostile
            #expect(failure(AppStoreNotification.verify(try notification(app: bad), with: verifier)) != nil, "\(hostile)")
        }
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

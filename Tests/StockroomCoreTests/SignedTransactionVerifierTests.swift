import AppStoreSimulator
import Foundation
import Testing
@testable import StockroomCore

/// StoreKit 2 JWS verification on OpenSSL, against crafted chains and payloads.
@Suite struct SignedTransactionVerifierTests {
    static let bundle = "com.example.stockroom.demo"
    static let chain = try! SigningChain()
    static let now = Date()
    static let year: TimeInterval = 365 * 86400

    static func payload(_ overrides: [String: Any] = [:], signedDate: Date = now) -> [UInt8] {
        var object: [String: Any] = [
            "transactionId": "2000000000000001", "originalTransactionId": "2000000000000001",
            "productId": "com.example.stockroom.demo.book1", "bundleId": bundle, "purchaseDate": 1_790_000_000_000.5,
            "type": "Non-Consumable", "environment": "Production", "signedDate": signedDate.timeIntervalSince1970 * 1000,
        ]
        for (key, value) in overrides { object[key] = value }
        return Array(try! JSONSerialization.data(withJSONObject: object))
    }

    static func verifier(root: Certificate = chain.root, environment: StoreEnvironment? = .production) -> SignedTransactionVerifier {
        SignedTransactionVerifier(root: root, bundleID: bundle, environment: environment)
    }

    static func failure(_ jws: String, _ verifier: SignedTransactionVerifier = verifier()) -> JWSFailure? {
        if case .failure(let failure) = verifier.verify(jws) { return failure }
        return nil
    }

    /// A chain of fresh keys; markers and validity as asked.
    static func craftedChain(
        leafOIDs: [String] = [JWSVerifier.leafOID], intermediateOIDs: [String] = [JWSVerifier.intermediateOID],
        leafValidity: ClosedRange<Date> = (now - year)...(now + year)
    ) throws -> (key: ECPrivateKey, x5c: [Certificate], root: Certificate) {
        let rootKey = try ECPrivateKey(), intermediateKey = try ECPrivateKey(), leafKey = try ECPrivateKey()
        let root = try Certificate.issue(
            commonName: "Root", subjectKey: rootKey, issuer: nil, isAuthority: true, notBefore: now - 5 * year, notAfter: now + 5 * year)
        let intermediate = try Certificate.issue(
            commonName: "Intermediate", subjectKey: intermediateKey, issuer: (root, rootKey), isAuthority: true,
            notBefore: now - 5 * year, notAfter: now + 5 * year, markerOIDs: intermediateOIDs)
        let leaf = try Certificate.issue(
            commonName: "Leaf", subjectKey: leafKey, issuer: (intermediate, intermediateKey), isAuthority: false,
            notBefore: leafValidity.lowerBound, notAfter: leafValidity.upperBound, markerOIDs: leafOIDs)
        return (leafKey, [leaf, intermediate, root], root)
    }

    @Test func aTransactionSignedByTheChainVerifiesAndDecodes() throws {
        let jws = try Self.chain.sign(
            payload: Self.payload(["appAccountToken": "8F2E6A4C-0000-4000-8000-000000000001", "revocationDate": 1_790_000_100_000.25]))
        let transaction = try Self.verifier().verify(jws).get()
        #expect(transaction.transactionId == "2000000000000001")
        #expect(transaction.productId == "com.example.stockroom.demo.book1")
        #expect(transaction.purchaseDate == 1_790_000_000_000, "fractional milliseconds are read")
        #expect(transaction.revocationDate == 1_790_000_100_000)
        #expect(transaction.appAccountToken == "8F2E6A4C-0000-4000-8000-000000000001")
    }

    @Test func anotherRootIsABadChain() throws {
        let other = try Self.craftedChain()
        let jws = try SigningChain.jws(payload: Self.payload(), key: other.key, x5c: other.x5c)
        guard case .badChain = Self.failure(jws) else { Issue.record("expected badChain"); return }
        #expect(Self.failure(jws, Self.verifier(root: other.root)) == nil, "the same JWS verifies against its own root")
    }

    @Test func aMissingLeafOrIntermediateOIDIsRefused() throws {
        let noLeafOID = try Self.craftedChain(leafOIDs: [])
        let jws1 = try SigningChain.jws(payload: Self.payload(), key: noLeafOID.key, x5c: noLeafOID.x5c)
        #expect(Self.failure(jws1, Self.verifier(root: noLeafOID.root)) == .missingOID("the leaf lacks \(JWSVerifier.leafOID)"))
        let noIntermediateOID = try Self.craftedChain(intermediateOIDs: [])
        let jws2 = try SigningChain.jws(payload: Self.payload(), key: noIntermediateOID.key, x5c: noIntermediateOID.x5c)
        #expect(
            Self.failure(jws2, Self.verifier(root: noIntermediateOID.root))
                == .missingOID("the intermediate lacks \(JWSVerifier.intermediateOID)"))
    }

    @Test func validityIsJudgedAtTheSignedDate() throws {
        let expired = try Self.craftedChain(leafValidity: (Self.now - 3 * Self.year)...(Self.now - 2 * Self.year))
        let signedNow = try SigningChain.jws(payload: Self.payload(), key: expired.key, x5c: expired.x5c)
        #expect(Self.failure(signedNow, Self.verifier(root: expired.root)) == .badChain("certificate has expired"))
        let signedThen = try SigningChain.jws(
            payload: Self.payload(signedDate: Self.now - 2.5 * Self.year), key: expired.key, x5c: expired.x5c)
        #expect(Self.failure(signedThen, Self.verifier(root: expired.root)) == nil, "genuine when it was signed")
    }

    @Test func aTamperedPayloadFailsTheSignature() throws {
        let jws = try Self.chain.sign(payload: Self.payload())
        let parts = jws.split(separator: ".").map(String.init)
        let forged = ByteEncoding.base64URL(Self.payload(["productId": "com.example.stockroom.demo.level2"]))
        #expect(Self.failure([parts[0], forged, parts[2]].joined(separator: ".")) == .badSignature)
    }

    @Test func algNoneAndOtherAlgorithmsAreRefused() throws {
        let chain = [Self.chain.leaf, Self.chain.intermediate, Self.chain.root]
        let key = try ECPrivateKey()
        for alg in ["none", "RS256", "HS256", "es256"] {
            let jws = try SigningChain.jws(payload: Self.payload(), key: key, x5c: chain, alg: alg)
            guard case .malformed(let detail) = Self.failure(jws) else { Issue.record("\(alg) accepted"); continue }
            #expect(detail.hasPrefix("alg must be ES256"))
        }
        let unsigned =
            try SigningChain.jws(payload: Self.payload(), key: key, x5c: chain, alg: "none").split(separator: ".").prefix(2).joined(
                separator: ".") + "."
        guard case .malformed = Self.failure(unsigned) else { Issue.record("an unsigned JWS was accepted"); return }
    }

    @Test(arguments: [1, 2, 4])
    func anX5cOtherThanThreeCertificatesIsRefused(count: Int) throws {
        let certificates = Array([Self.chain.leaf, Self.chain.intermediate, Self.chain.root, Self.chain.root].prefix(count))
        let jws = try SigningChain.jws(payload: Self.payload(), key: try ECPrivateKey(), x5c: certificates)
        #expect(Self.failure(jws) == .malformed("x5c must hold exactly 3 certificates"))
    }

    @Test func bundleAndEnvironmentAreChecked() throws {
        #expect(
            Self.failure(try Self.chain.sign(payload: Self.payload(["bundleId": "com.example.other"])))
                == .wrongBundle(expected: Self.bundle, actual: "com.example.other"))
        let sandbox = try Self.chain.sign(payload: Self.payload(["environment": "Sandbox"]))
        #expect(Self.failure(sandbox) == .wrongEnvironment(expected: .production, actual: "Sandbox"))
        #expect(Self.failure(sandbox, Self.verifier(environment: nil)) == nil)
    }

    @Test func appleRootCertificatesParse() throws {
        let g3 = try AppleRootCertificates.rootCAG3()
        #expect(g3.subject.contains("Apple Root CA - G3"))
        #expect(try AppleRootCertificates.incRoot().subject.contains("Apple Root CA"))
        // A simulator JWS does not verify against Apple's real root.
        guard case .badChain = Self.failure(try Self.chain.sign(payload: Self.payload()), Self.verifier(root: g3)) else {
            Issue.record("a simulator JWS verified against Apple's root")
            return
        }
    }

    /// 10,000 random and mutated inputs: every one refused, none crashes.
    @Test func randomAndMutatedInputsNeverCrash() async throws {
        let genuine = Array(try Self.chain.sign(payload: Self.payload()).utf8)
        let verifier = Self.verifier()
        var generator = SystemRandomNumberGenerator()
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.=+/{}\":,".utf8)
        var refused = 0
        for round in 0..<10_000 {
            if round.isMultiple(of: 50) { await Task.yield() }
            var input: [UInt8]
            if round % 2 == 0 {
                input = genuine
                for _ in 0..<Int.random(in: 1...8, using: &generator) {
                    let index = Int.random(in: 0..<input.count, using: &generator)
                    switch Int.random(in: 0..<3, using: &generator) {
                    case 0: input[index] = alphabet.randomElement(using: &generator)!
                    case 1: input.remove(at: index)
                    default: input.insert(alphabet.randomElement(using: &generator)!, at: index)
                    }
                    if input.isEmpty { input = [0x2e] }
                }
            } else {
                input = (0..<Int.random(in: 0...400, using: &generator)).map { _ in alphabet.randomElement(using: &generator)! }
            }
            if case .failure = verifier.verify(String(decoding: input, as: UTF8.self)) { refused += 1 }
        }
        #expect(refused >= 9_990, "a mutation can, very rarely, land in unsigned base64 padding")
    }
}

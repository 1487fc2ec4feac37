import AppStoreSimulator
import COpenSSL
import Foundation
import Synchronization
import Testing
@testable import StockroomCore

/// The cache of verified chains: a JWS on a chain that verified skips the chain work, never the
/// dates, the signature, or a failed chain.
@Suite struct VerifiedChainCacheTests {
    static let chain = try! SigningChain()
    static let year: TimeInterval = 365 * 24 * 3600

    static func jws(on chain: SigningChain = chain, signedAt date: Date = Date(), transaction: String = "2000000000000001") throws -> String
    {
        let milliseconds = Int64(date.timeIntervalSince1970 * 1000)
        let payload =
            #"""
            {"transactionId":"\#(transaction)","originalTransactionId":"\#(transaction)","productId":"com.example.book",\#
            "bundleId":"com.example.stockroom.demo","purchaseDate":\#(milliseconds),"environment":"Production",\#
            "signedDate":\#(milliseconds)}
            """#
        return try chain.sign(payload: Array(payload.utf8))
    }

    /// A clock the test moves.
    final class Clock: Sendable {
        private let offset = Mutex<TimeInterval>(0)
        func advance(_ seconds: TimeInterval) { offset.withLock { $0 += seconds } }
        var now: Date { Date().addingTimeInterval(offset.withLock { $0 }) }
    }

    @Test func aSecondJWSOnTheSameChainSkipsTheChainButNotItsSignature() throws {
        let cache = VerifiedChainCache()
        let verifier = JWSVerifier(root: Self.chain.root, chains: cache)
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(transaction: "1")).get() }
        #expect(cache.statistics.hits == 0 && cache.statistics.chains == 1)
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(transaction: "2")).get() }
        #expect(cache.statistics.hits == 1, "verified from the cache")

        // The same chain, a payload changed after signing: the cached key refuses it.
        let parts = try Self.jws(transaction: "3").split(separator: ".").map(String.init)
        let forged =
            #"""
            {"transactionId":"4","productId":"com.example.book","bundleId":"com.example.stockroom.demo",\#
            "signedDate":\#(Int64(Date().timeIntervalSince1970 * 1000))}
            """#
        let tampered = [parts[0], ByteEncoding.base64URL(Array(forged.utf8)), parts[2]].joined(separator: ".")
        #expect(verifier.verify(tampered) == .failure(.badSignature))
        #expect(cache.statistics.hits == 2, "the hit still checked the signature")
    }

    @Test func aPayloadSignedOutsideTheCertificatesValidityIsRefusedEvenWithTheChainCached() throws {
        let cache = VerifiedChainCache()
        let verifier = JWSVerifier(root: Self.chain.root, chains: cache)
        #expect(throws: Never.self) { try verifier.verify(try Self.jws()).get() }
        // The leaf is valid from a year ago for five years.
        for date in [Date().addingTimeInterval(6 * Self.year), Date().addingTimeInterval(-2 * Self.year)] {
            guard case .failure(.badChain) = verifier.verify(try Self.jws(signedAt: date)) else {
                Issue.record("a payload signed at \(date) verified")
                continue
            }
        }
        #expect(cache.statistics.hits == 0, "no shortcut for a date the certificates do not cover")
    }

    @Test func aChainThatFailedIsNotKept() throws {
        let stranger = try SigningChain()
        let cache = VerifiedChainCache()
        let verifier = JWSVerifier(root: Self.chain.root, chains: cache)
        for _ in 0..<2 {
            guard case .failure(.badChain) = verifier.verify(try Self.jws(on: stranger)) else {
                Issue.record("a chain to another root verified")
                continue
            }
        }
        #expect(cache.statistics.chains == 0 && cache.statistics.hits == 0)
    }

    @Test func entriesAreBoundedInNumberAndAge() throws {
        let clock = Clock()
        let cache = VerifiedChainCache(capacity: 2, lifetime: 900, now: { clock.now })
        let chains = try (0..<3).map { _ in try SigningChain() }
        let verifier = JWSVerifier(root: chains[0].root, otherRoots: chains.dropFirst().map(\.root), chains: cache)
        for chain in chains { #expect(throws: Never.self) { try verifier.verify(try Self.jws(on: chain)).get() } }
        #expect(cache.statistics.chains == 2, "the least recently used went")
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(on: chains[0])).get() }
        #expect(cache.statistics.hits == 0, "the first chain was the one dropped")
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(on: chains[2])).get() }
        #expect(cache.statistics.hits == 1)

        clock.advance(901)
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(on: chains[2])).get() }
        #expect(cache.statistics.hits == 1, "past 15 minutes the chain is verified again")
    }

    @Test func aChainWhoseCertificateHasSinceExpiredIsNotServed() throws {
        let clock = Clock()
        let cache = VerifiedChainCache(lifetime: 100 * Self.year, now: { clock.now })
        let verifier = JWSVerifier(root: Self.chain.root, chains: cache)
        let signed = Date()
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(signedAt: signed)).get() }
        clock.advance(6 * Self.year)  // the leaf (five years) has expired by the clock
        #expect(throws: Never.self) { try verifier.verify(try Self.jws(signedAt: signed)).get() }
        #expect(cache.statistics.hits == 0, "an expired certificate is never served from the cache")
    }

    @Test func withoutACacheEveryChainIsVerified() throws {
        let verifier = JWSVerifier(root: Self.chain.root, chains: nil)
        for _ in 0..<2 { #expect(throws: Never.self) { try verifier.verify(try Self.jws()).get() } }
        #expect(verifier.chains == nil)
    }

    /// OpenSSL's own judgement of a moment (`X509_cmp_time`, as `X509_verify_cert` uses it).
    static func opensslJudges(_ certificate: Certificate, valid date: Date) -> Bool {
        guard var seconds = CertificateTime.seconds(date) else { return false }
        return X509_cmp_time(X509_get0_notBefore(certificate.x509), &seconds) == -1
            && X509_cmp_time(X509_get0_notAfter(certificate.x509), &seconds) == 1
    }

    /// A certificate and a kept chain read their times once; they must judge every moment as
    /// OpenSSL does, at each edge and a second either side. The dates cover UTCTime (before
    /// 2050) and GeneralizedTime (from 2050) and half-second moments.
    @Test func certificatesAndKeptChainsJudgeEveryMomentAsOpenSSLDoes() throws {
        let key = try ECPrivateKey()
        let now = Date(timeIntervalSince1970: floor(Date().timeIntervalSince1970))
        let edges = [now - Self.year, now + 100, now + 30 * Self.year, now - 3 * Self.year, now + 40 * Self.year]
        let root = try Certificate.issue(
            commonName: "Root", subjectKey: key, issuer: nil, isAuthority: true, notBefore: edges[3], notAfter: edges[4])
        let middle = try Certificate.issue(
            commonName: "Intermediate", subjectKey: key, issuer: (root, key), isAuthority: true, notBefore: edges[0], notAfter: edges[2])
        let leaf = try Certificate.issue(
            commonName: "Leaf", subjectKey: key, issuer: (middle, key), isAuthority: false, notBefore: edges[0], notAfter: edges[1])
        for certificates in [
            [leaf, middle, root], [middle, root], [root], [try AppleRootCertificates.incRoot(), try AppleRootCertificates.rootCAG3()],
        ] {
            let chain = VerifiedChainCache.Chain(certificates: certificates, key: key.publicKey)
            let moments = certificates.flatMap { certificate -> [Date] in
                guard let validity = certificate.validity else { return [] }
                return [validity.lowerBound, validity.upperBound].flatMap { edge in
                    [-1, -0.5, 0, 0.5, 1].map { Date(timeIntervalSince1970: Double(edge) + $0) }
                }
            }
            #expect(moments.count == 10 * certificates.count, "every certificate's times were read")
            for moment in moments + edges + [Date.distantPast, .distantFuture] {
                let openssl = certificates.map { Self.opensslJudges($0, valid: moment) }
                #expect(certificates.map { $0.isValid(at: moment) } == openssl, "at \(moment.timeIntervalSince1970)")
                #expect(chain.isValid(at: moment) == !openssl.contains(false), "at \(moment.timeIntervalSince1970)")
            }
        }
    }
}

extension JWSVerifier {
    /// The verification alone (chain, signature, date), the payload read as a transaction.
    fileprivate func verify(_ jws: String) -> Result<Bool, JWSFailure> {
        verify(jws, as: SignedTransaction.self).map { _ in true }
    }
}

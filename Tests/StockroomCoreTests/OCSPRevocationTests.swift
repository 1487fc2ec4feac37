import AppStoreSimulator
import Foundation
import StockroomCore
import StockroomTestSupport
import Testing

/// OCSP checks of the chain that signs a JWS, against real `openssl ocsp` responders on loopback
/// (`OCSPResponderFixture`), through libcurl: what each answer and each policy decide, what is
/// kept and for how long, and that the responder is asked once per certificate, not per JWS.
@Suite struct OCSPRevocationTests {
    typealias Fixture = OCSPResponderFixture

    static func failure(_ result: Result<Verified<SignedTransaction>, JWSFailure>) -> JWSFailure? {
        if case .failure(let failure) = result { return failure }
        return nil
    }

    static func outcomes(_ verifier: SignedTransactionVerifier) -> [String: Int] {
        verifier.revocation?.statistics.outcomes ?? [:]
    }

    @Test func aGoodChainPassesAfterTheLeafAndTheIntermediateWereAsked() async throws {
        let fixture = try await Fixture.start()
        let verifier = fixture.verifier(.hard)
        let result = await verifier.verifyOnline(try fixture.signedTransaction(by: "good"), as: SignedTransaction.self)
        #expect(Self.failure(result) == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 1, "the leaf, at the intermediate's responder")
        #expect(Fixture.asked(fixture.rootResponder) == 1, "the intermediate, at the root's responder")
        let log = try String(contentsOfFile: fixture.leafResponder.log, encoding: .utf8)
        #expect(log.contains("1st line: POST / HTTP/1.1"), "POSTed, as Apple's library does")
        #expect(Self.outcomes(verifier)["good"] == 2)
    }

    @Test func aRevokedLeafIsRefusedUnderHardAndSoftAndItsCachedChainIsDropped() async throws {
        let fixture = try await Fixture.start()
        for policy in [RevocationPolicy.hard, .soft] {
            let verifier = fixture.verifier(policy)
            let jws = try fixture.signedTransaction(by: "revoked")
            // The synchronous verification alone accepts it: the chain and signature are fine.
            #expect(Self.failure(verifier.verify(jws, as: SignedTransaction.self)) == nil)
            #expect(verifier.jws.chains?.statistics.chains == 1)
            let result = await verifier.verifyOnline(jws, as: SignedTransaction.self)
            #expect(Self.failure(result) == .certificateRevoked("/CN=revoked"), "\(policy)")
            #expect(Self.failure(result)?.code == "jws_certificate_revoked")
            #expect(verifier.jws.chains?.statistics.chains == 0, "a revoked answer drops the cached chain (\(policy))")
            #expect(Self.outcomes(verifier)["revoked"] == 1)
        }
        #expect(Fixture.asked(fixture.leafResponder) == 2, "one request per verifier (each its own cache)")
    }

    @Test func aRevokedAnswerIsKeptSoTheNextJWSIsRefusedWithoutAsking() async throws {
        let fixture = try await Fixture.start()
        let verifier = fixture.verifier(.soft)
        for id in ["2000000000000001", "2000000000000002"] {
            let result = await verifier.verifyOnline(
                try fixture.signedTransaction(by: "revoked", transactionID: id), as: SignedTransaction.self)
            #expect(Self.failure(result) == .certificateRevoked("/CN=revoked"))
        }
        #expect(Fixture.asked(fixture.leafResponder) == 1)
        #expect(Self.outcomes(verifier)["revoked"] == 1 && Self.outcomes(verifier)["cached"] == 1)
    }

    @Test func anUnknownLeafIsRefusedUnderHardAndAllowedAndCountedUnderSoft() async throws {
        let fixture = try await Fixture.start()
        let jws = try fixture.signedTransaction(by: "unknown")
        let hard = fixture.verifier(.hard)
        #expect(Self.failure(await hard.verifyOnline(jws, as: SignedTransaction.self)) == .revocationUnknown("/CN=unknown"))
        let soft = fixture.verifier(.soft)
        #expect(Self.failure(await soft.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.outcomes(soft)["unknown"] == 1)
    }

    @Test func aResponderThatIsDownRefusesUnderHardAndIsAllowedAndCountedUnderSoft() async throws {
        let fixture = try await Fixture.start()
        let jws = try fixture.signedTransaction(by: "down")
        let hard = fixture.verifier(.hard)
        let refused = Self.failure(await hard.verifyOnline(jws, as: SignedTransaction.self))
        guard case .revocationUnavailable(let detail) = refused else {
            Issue.record("expected revocationUnavailable, got \(String(describing: refused))")
            return
        }
        #expect(detail.hasPrefix("/CN=down"))
        #expect(refused?.code == "jws_revocation_unavailable")

        let clock = OCSPTestClock()
        let soft = fixture.verifier(.soft, clock: clock)
        #expect(Self.failure(await soft.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.outcomes(soft)["unreachable"] == 1)
        // Remembered for a while: allowed and counted again, without another attempt's timeout.
        #expect(Self.failure(await soft.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.outcomes(soft)["unreachable"] == 2)
        #expect(Fixture.asked(fixture.rootResponder) == 1, "hard stopped at the leaf; soft asked about the intermediate once")
    }

    @Test func offNeverAsks() async throws {
        let fixture = try await Fixture.start()
        let verifier = fixture.verifier(.off)
        for name in ["good", "revoked", "down"] {
            #expect(Self.failure(await verifier.verifyOnline(try fixture.signedTransaction(by: name), as: SignedTransaction.self)) == nil)
        }
        #expect(Fixture.asked(fixture.leafResponder) == 0 && Fixture.asked(fixture.rootResponder) == 0)
        #expect(Self.outcomes(verifier).isEmpty)
    }

    @Test func aKeptAnswerIsReusedUntilItsNextUpdateAndNotAfter() async throws {
        let fixture = try await Fixture.start(nextUpdateMinutes: 1)
        let clock = OCSPTestClock()
        let verifier = fixture.verifier(.hard, clock: clock)
        func verify(_ id: String) async throws -> JWSFailure? {
            Self.failure(
                await verifier.verifyOnline(try fixture.signedTransaction(by: "good", transactionID: id), as: SignedTransaction.self))
        }
        #expect(try await verify("2000000000000001") == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 1)
        clock.advance(30)
        #expect(try await verify("2000000000000002") == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 1, "within nextUpdate (one minute): the kept answer")
        #expect(Self.outcomes(verifier)["cached"] == 2, "both certificates from the cache")
        clock.advance(90)
        #expect(try await verify("2000000000000003") == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 2, "past nextUpdate: asked again")
        #expect(Fixture.asked(fixture.rootResponder) == 2)
    }

    @Test func anAnswerWithoutNextUpdateIsKeptOnlyBriefly() async throws {
        let fixture = try await Fixture.start(nextUpdateMinutes: nil)
        let clock = OCSPTestClock()
        var limits = OCSPRevocationChecker.Limits()
        limits.withoutNextUpdate = 60
        let verifier = fixture.verifier(.hard, clock: clock, limits: limits)
        let jws = try fixture.signedTransaction(by: "good")
        #expect(Self.failure(await verifier.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        clock.advance(59)
        #expect(Self.failure(await verifier.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 1)
        clock.advance(2)
        #expect(Self.failure(await verifier.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Fixture.asked(fixture.leafResponder) == 2)
    }

    @Test func concurrentChecksOfOneCertificateShareOneRequest() async throws {
        let fixture = try await Fixture.start()
        let verifier = fixture.verifier(.hard)
        let jws = try (0..<16).map { try fixture.signedTransaction(by: "good", transactionID: String(2_000_000_000_000_100 + $0)) }
        let failures = await withTaskGroup(of: JWSFailure?.self) { group in
            for one in jws { group.addTask { Self.failure(await verifier.verifyOnline(one, as: SignedTransaction.self)) } }
            return await group.reduce(into: [JWSFailure?]()) { $0.append($1) }
        }
        #expect(failures.count == 16 && failures.allSatisfy { $0 == nil })
        #expect(Fixture.asked(fixture.leafResponder) == 1)
        #expect(Fixture.asked(fixture.rootResponder) == 1)
    }

    @Test func anAnswerSignedByAKeyOutsideTheChainIsNoAnswer() async throws {
        let fixture = try await Fixture.start()
        let jws = try fixture.signedTransaction(by: "rogue")
        let hard = fixture.verifier(.hard)
        let refused = Self.failure(await hard.verifyOnline(jws, as: SignedTransaction.self))
        guard case .revocationUnavailable(let detail) = refused else {
            Issue.record("expected revocationUnavailable, got \(String(describing: refused))")
            return
        }
        #expect(detail.contains("signature does not verify"), "\(detail)")
        #expect(Fixture.asked(fixture.rogueResponder) == 1, "the rogue responder answered, signing good")
        let soft = fixture.verifier(.soft)
        #expect(Self.failure(await soft.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.outcomes(soft)["unreachable"] == 1 && Self.outcomes(soft)["good"] == 1)
    }

    @Test func aNotificationIsRefusedWhenItsPayloadOrItsTransactionIsSignedByARevokedLeaf() async throws {
        let fixture = try await Fixture.start()
        let verifier = fixture.verifier(.soft)
        func notification(signedBy outer: String, transactionBy inner: String) throws -> String {
            let info = try fixture.signedTransaction(by: inner)
            let payload: [String: Any] = [
                "notificationType": "REFUND", "notificationUUID": UUID().uuidString, "signedDate": Date().timeIntervalSince1970 * 1000,
                "data": ["bundleId": Fixture.bundle, "signedTransactionInfo": info],
            ]
            return try fixture.jws(by: outer, payload: Array(JSONSerialization.data(withJSONObject: payload)))
        }
        func failure(_ jws: String) async -> JWSFailure? {
            if case .failure(let failure) = await AppStoreNotification.verifyOnline(jws, with: verifier) { return failure }
            return nil
        }
        #expect(await failure(try notification(signedBy: "good", transactionBy: "good")) == nil)
        #expect(await failure(try notification(signedBy: "revoked", transactionBy: "good")) == .certificateRevoked("/CN=revoked"))
        #expect(await failure(try notification(signedBy: "good", transactionBy: "revoked")) == .certificateRevoked("/CN=revoked"))
        // The synchronous verification alone accepts all three.
        #expect(
            (try? AppStoreNotification.verify(try notification(signedBy: "revoked", transactionBy: "revoked"), with: verifier).get()) != nil
        )
    }

    @Test func aChainThatNamesNoResponderHasNothingToCheck() async throws {
        // The simulator's chains carry no AIA: nothing is asked, under hard too (as Apple's library).
        let chain = try SigningChain()
        var verifier = SignedTransactionVerifier(root: chain.root, bundleID: Fixture.bundle, environment: nil)
        verifier.revocation = OCSPRevocationChecker(policy: .hard)
        let jws = try chain.sign(payload: Fixture.transaction("2000000000000001"))
        #expect(Self.failure(await verifier.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.failure(await verifier.verifyOnline(jws, as: SignedTransaction.self)) == nil)
        #expect(Self.outcomes(verifier) == ["no_responder": 2, "cached": 2])
    }
}

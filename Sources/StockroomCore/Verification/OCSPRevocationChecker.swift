import Foundation
import Logging
import Metrics
import Synchronization

/// Asks whether the certificates that signed a JWS were revoked, as Apple's libraries do with
/// their online checks on: the leaf (its issuer: the intermediate) and the intermediate (its
/// issuer: the root), each at the OCSP responder its Authority Information Access names, over
/// libcurl (no redirect, a few seconds at most, a small answer). It runs after the synchronous
/// verification, on the chain that verified; the policy (`RevocationPolicy`) decides what an
/// answer other than good means.
///
/// An answer is kept (256 certificates at most) until its `nextUpdate`, and never past it; an
/// answer without one for a minute; so a warm verification asks nothing and costs one lookup. A
/// certificate that names no responder has nothing to check (as swift-certificates' OCSP policy
/// judges). A failed attempt is remembered for `afterFailure`, so an unreachable responder costs
/// one timeout per certificate per interval, not one per JWS. Concurrent checks of one
/// certificate share one request.
public final class OCSPRevocationChecker: Sendable {
    /// Bounds of the cache and of each request.
    public struct Limits: Sendable {
        /// Certificates whose answers are kept; the one expiring first goes when full.
        public var capacity = 256
        /// How long an answer without `nextUpdate` is kept.
        public var withoutNextUpdate: TimeInterval = 60
        /// The longest any answer is kept, whatever its `nextUpdate`.
        public var longest: TimeInterval = 12 * 3600
        /// How long a failed attempt stands before the responder is asked again.
        public var afterFailure: TimeInterval = 30
        public var connectTimeout: Duration = .seconds(3)
        public var totalTimeout: Duration = .seconds(5)
        /// The largest answer read; a bigger one is no answer.
        public var maximumAnswerBytes = 64 << 10

        public init() {}
    }

    /// What the chain's answers decide under the policy.
    public enum Verdict: Sendable, Equatable {
        /// Good answers, certificates with nothing to check, or what the policy allows.
        case allowed
        /// A responder said this certificate is revoked: refused under every policy.
        case revoked(fingerprint: String, subject: String)
        /// `--ocsp hard` refuses an unknown certificate, or a responder without a usable answer.
        case refused(JWSFailure)

        /// Why the JWS is refused; nil when it is allowed.
        public var failure: JWSFailure? {
            switch self {
            case .allowed: nil
            case .revoked(_, let subject): .certificateRevoked(subject)
            case .refused(let failure): failure
            }
        }
    }

    /// What is known of one certificate.
    enum Status: Sendable, Equatable {
        case answered(OCSPAnswer.Status)
        /// The certificate names no OCSP responder.
        case noResponder
        /// No usable answer: the responder is out of reach, answered an error, or its answer does
        /// not verify.
        case unanswered(String)

        /// The `outcome` label of `stockroom_ocsp_checks_total` for a check that asked.
        var outcome: String {
            switch self {
            case .answered(let status): status.rawValue
            case .noResponder: "no_responder"
            case .unanswered: "unreachable"
            }
        }
    }

    private struct Entry {
        var status: Status
        var until: Date
    }

    private struct State {
        /// Each certificate's status by `fingerprint`, until its time.
        var kept: [String: Entry] = [:]
        /// Checks by `stockroom_ocsp_checks_total`'s outcome, as the metric counts them.
        var outcomes: [String: Int] = [:]
    }

    public let policy: RevocationPolicy
    let limits: Limits
    private let transport: any UpstreamTransport
    private let now: @Sendable () -> Date
    private let logger: Logger
    private let state = Mutex(State())
    private let flights = SingleFlight<Status>()

    /// `transport` defaults to libcurl with `limits`' timeouts and answer size.
    public init(
        policy: RevocationPolicy, limits: Limits = .init(), transport: (any UpstreamTransport)? = nil,
        now: @escaping @Sendable () -> Date = { Date() }, logger: Logger = Logger(label: "stockroom.ocsp")
    ) {
        self.policy = policy
        self.limits = limits
        self.transport =
            transport
            ?? CurlHTTPClient(
                configuration: .init(
                    connectTimeout: limits.connectTimeout, totalTimeout: limits.totalTimeout,
                    maximumResponseBytes: limits.maximumAnswerBytes))
        self.now = now
        self.logger = logger
    }

    /// The verdict on `chain` (leaf first, the trusted root last): every certificate but the
    /// root, against its issuer, in order; the first that refuses decides.
    public func check(_ chain: VerifiedChainCache.Chain) async -> Verdict {
        let checked = chain.certificates.count - 1
        guard policy != .off, checked > 0 else { return .allowed }
        let now = now()
        let known = state.withLock { state in
            let known = (0..<checked).map { index -> Status? in
                guard let entry = state.kept[chain.fingerprints[index]], entry.until > now else { return nil }
                return entry.status
            }
            if known.allSatisfy({ $0 == .answered(.good) || $0 == .noResponder }) { state.outcomes["cached", default: 0] += checked }
            return known
        }
        // The warm path: every answer kept and good.
        if known.allSatisfy({ $0 == .answered(.good) || $0 == .noResponder }) {
            StockroomMetrics.ocspChecks(outcome: "cached", count: checked)
            return .allowed
        }
        for index in 0..<checked {
            let status: Status
            // Kept meanwhile (a check of the same certificate that ran while this one waited for
            // the one before): no second request.
            if let remembered = known[index] ?? kept(chain.fingerprints[index]) {
                status = remembered
                count(remembered.isAnswer ? "cached" : remembered.outcome)
            } else {
                let query = OCSPQuery(certificate: chain.certificates[index], issuer: chain.certificates[index + 1])
                let certificates = chain.certificates
                let fingerprint = chain.fingerprints[index]
                status = await flights.run(fingerprint) { await self.ask(query, fingerprint: fingerprint, chain: certificates) }
                count(status.outcome)
            }
            let subject = chain.certificates[index].subject
            switch status {
            case .answered(.good), .noResponder: continue
            case .answered(.revoked): return .revoked(fingerprint: chain.fingerprints[index], subject: subject)
            case .answered(.unknown): if policy == .hard { return .refused(.revocationUnknown(subject)) }
            case .unanswered(let reason): if policy == .hard { return .refused(.revocationUnavailable("\(subject): \(reason)")) }
            }
        }
        return .allowed
    }

    /// What is kept now for the certificate of this `fingerprint`, if anything.
    private func kept(_ fingerprint: String) -> Status? {
        let now = now()
        return state.withLock { state in state.kept[fingerprint].flatMap { $0.until > now ? $0.status : nil } }
    }

    private func count(_ outcome: String) {
        state.withLock { $0.outcomes[outcome, default: 0] += 1 }
        StockroomMetrics.ocspChecks(outcome: outcome, count: 1)
    }

    /// Asks the certificate's first responder, keeps what it learnt, and logs it.
    private func ask(_ query: OCSPQuery, fingerprint: String, chain: [Certificate]) async -> Status {
        // A flight that ended just before this one began has kept its answer.
        if let known = kept(fingerprint) { return known }
        guard let responder = query.certificate.ocspResponders.first else {
            keep(.noResponder, nextUpdate: nil, for: fingerprint)
            return .noResponder
        }
        let status: Status
        var nextUpdate: Date?
        switch await answer(query, from: responder, chain: chain) {
        case .success(let answer):
            status = .answered(answer.status)
            nextUpdate = answer.nextUpdate
        case .failure(let unusable):
            status = .unanswered(unusable.description)
        }
        keep(status, nextUpdate: nextUpdate, for: fingerprint)
        log(status, query.certificate, responder: responder)
        return status
    }

    private func answer(_ query: OCSPQuery, from responder: String, chain: [Certificate]) async -> Result<
        OCSPAnswer, OCSPAnswer.Unusable
    > {
        let body: [UInt8]
        do {
            body = try query.request()
        } catch {
            return .failure(.init(error.description))
        }
        let response: UpstreamResponse
        do {
            response = try await transport.send(
                UpstreamRequest(
                    method: .post, url: responder, headers: [("Content-Type", "application/ocsp-request")], body: body,
                    timeout: limits.totalTimeout))
        } catch {
            return .failure(.init(error.description))
        }
        guard response.status == 200 else { return .failure(.init("the responder answered HTTP \(response.status)")) }
        guard let root = chain.last else { return .failure(.init("no root")) }
        return query.read(response.body, root: root, chain: Array(chain.dropLast()))
    }

    /// Keeps `status` until `nextUpdate` (an answer), bounded by the limits; a failure for
    /// `afterFailure`. Never kept past its `nextUpdate`; when full, the entry expiring first goes.
    private func keep(_ status: Status, nextUpdate: Date?, for fingerprint: String) {
        let now = now()
        let until: Date =
            switch status {
            case .answered: min(now + limits.longest, nextUpdate ?? now + limits.withoutNextUpdate)
            case .noResponder: now + limits.longest
            case .unanswered: now + limits.afterFailure
            }
        state.withLock { state in
            guard until > now else {
                state.kept[fingerprint] = nil
                return
            }
            if state.kept[fingerprint] == nil, state.kept.count >= limits.capacity {
                state.kept = state.kept.filter { $0.value.until > now }
                if state.kept.count >= limits.capacity, let first = state.kept.min(by: { $0.value.until < $1.value.until }) {
                    state.kept[first.key] = nil
                }
            }
            state.kept[fingerprint] = Entry(status: status, until: until)
        }
    }

    /// One line per request's outcome (never per JWS, never a JWS): what the operator sees.
    private func log(_ status: Status, _ certificate: Certificate, responder: String) {
        var metadata: Logger.Metadata = ["certificate": .string(certificate.subject), "responder": .string(responder)]
        switch status {
        case .answered(.good), .noResponder:
            logger.debug("OCSP: good", metadata: metadata)
        case .answered(.revoked):
            logger.error("OCSP: a certificate of the App Store signing chain is revoked; its JWS are refused", metadata: metadata)
        case .answered(.unknown):
            logger.warning(
                "OCSP: the responder does not know a certificate of the signing chain; \(consequence)", metadata: metadata)
        case .unanswered(let reason):
            metadata["reason"] = .string(reason)
            logger.warning("OCSP: no usable answer for a certificate of the signing chain; \(consequence)", metadata: metadata)
        }
    }

    private var consequence: String {
        policy == .hard ? "its JWS are refused (--ocsp hard)" : "its JWS are allowed (--ocsp soft)"
    }

    /// Certificates whose status is kept now, and the checks by outcome so far (as
    /// `stockroom_ocsp_checks_total` counts them): for tests and `doctor`.
    public var statistics: (kept: Int, outcomes: [String: Int]) { state.withLock { ($0.kept.count, $0.outcomes) } }
}

extension OCSPRevocationChecker.Status {
    /// Whether this is a responder's answer (kept until its `nextUpdate`), not a failure.
    fileprivate var isAnswer: Bool {
        if case .answered = self { return true }
        return self == .noResponder
    }
}

extension StockroomMetrics {
    /// `stockroom_ocsp_checks_total{outcome}`: certificates of signing chains checked for
    /// revocation. `outcome`: good, revoked, unknown (a responder's answer just asked for),
    /// unreachable (no usable answer: out of reach, an error, an answer that does not verify;
    /// also while a failure is remembered), no_responder (the certificate names none), cached
    /// (an answer kept until its nextUpdate, reused without a request).
    static func ocspChecks(outcome: String, count: Int) {
        Counter(label: "stockroom_ocsp_checks_total", dimensions: [("outcome", outcome)]).increment(by: Int64(count))
    }
}

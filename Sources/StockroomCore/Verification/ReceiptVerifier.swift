import Foundation

/// Verifies an app receipt for a request: the seam between the download API and Apple.
public protocol ReceiptVerifier: Sendable {
    /// The verdict on `request`; `freshness` says whether a recently cached answer will do.
    func verify(_ request: VerificationRequest, freshness: VerificationFreshness) async -> ReceiptVerdict

    /// The verdict on a receipt already normalised and classified locally (`ReceiptProof.parse`).
    func verify(_ proof: ReceiptProof, productID: String?, transactionID: String?, freshness: VerificationFreshness) async -> ReceiptVerdict

    /// The verdicts on one receipt for each of `transactionIDs`, from one answer of the App
    /// Store: re-fulfilment verifies each distinct proof once, whatever the rows kept under it.
    func verify(_ proof: ReceiptProof, transactionIDs: [String], freshness: VerificationFreshness) async -> [String: ReceiptVerdict]
}

extension ReceiptVerifier {
    /// Verifiers with no shared answer to reuse ask once per transaction.
    public func verify(_ proof: ReceiptProof, transactionIDs: [String], freshness: VerificationFreshness) async -> [String: ReceiptVerdict]
    {
        var verdicts: [String: ReceiptVerdict] = [:]
        for id in transactionIDs where verdicts[id] == nil {
            verdicts[id] = await verify(proof, productID: nil, transactionID: id, freshness: freshness)
        }
        return verdicts
    }

    /// Verifiers that only know raw requests get the proof's canonical text.
    public func verify(_ proof: ReceiptProof, productID: String?, transactionID: String?, freshness: VerificationFreshness) async
        -> ReceiptVerdict
    {
        await verify(VerificationRequest(receiptData: proof.text, productID: productID, transactionID: transactionID), freshness: freshness)
    }
}

/// A receipt and what the caller wants it to prove.
public struct VerificationRequest: Sendable, Hashable {
    /// Base64 app receipt or transaction receipt, as the client sent it.
    public var receiptData: String
    /// The product the caller wants; nil checks only that the receipt is valid for the app.
    public var productID: String?
    /// The very transaction the caller claims; nil takes the product's most recent purchase.
    public var transactionID: String?

    public init(receiptData: String, productID: String? = nil, transactionID: String? = nil) {
        self.receiptData = receiptData
        self.productID = productID
        self.transactionID = transactionID
    }
}

/// Whether a cached upstream answer may stand in for a new call.
public enum VerificationFreshness: Sendable {
    /// A valid answer younger than the cache interval will do (downloads, resumes).
    case cachedAllowed
    /// Ask Apple now (operators re-fulfilling, refunds suspected).
    case upstreamOnly
}

/// The production `ReceiptVerifier`: local refusal of what is no receipt, then verifyReceipt
/// with single flight and a short cache keyed by the normalised receipt's digest, then
/// Stockroom's checks (bundle, product, transaction, cancellation, expiry).
public final class AppStoreReceiptVerifier: ReceiptVerifier {
    public let client: VerifyReceiptClient
    public let bundleID: String
    /// How long a valid upstream answer is reused; zero turns the cache off.
    public let cacheInterval: Duration
    /// The current time, for expiry; injectable for tests.
    public let now: @Sendable () -> Date
    private let flights = SingleFlight<VerifyReceiptClient.Outcome>()
    private let cache: VerdictCache<VerifyReceiptAnswer>

    public init(
        client: VerifyReceiptClient, bundleID: String, cacheInterval: Duration = .seconds(300),
        now: @escaping @Sendable () -> Date = { Date() }
    ) {
        self.client = client
        self.bundleID = bundleID
        self.cacheInterval = cacheInterval
        self.now = now
        self.cache = VerdictCache(interval: cacheInterval)
    }

    /// Parses the receipt first: what is not a receipt is `.invalid(.malformedReceipt)` with no upstream call.
    public func verify(_ request: VerificationRequest, freshness: VerificationFreshness = .cachedAllowed) async -> ReceiptVerdict {
        guard let proof = ReceiptProof.parse(request.receiptData) else { return .invalid(.malformedReceipt) }
        return await verify(proof, productID: request.productID, transactionID: request.transactionID, freshness: freshness)
    }

    /// Verifies a parsed proof: its digest keys the cache and single flight, its canonical text goes upstream.
    public func verify(
        _ proof: ReceiptProof, productID: String?, transactionID: String?, freshness: VerificationFreshness = .cachedAllowed
    ) async -> ReceiptVerdict {
        let claim = RequestedPurchase(productID: productID, transactionID: transactionID)
        switch await answer(proof, freshness: freshness) {
        case .receipt(let receipt): return Self.check(receipt, claim, bundleID: bundleID, now: now())
        case .rejected(let reason): return .invalid(reason)
        case .unavailable(let reason, let retryAfter): return .unavailable(reason: reason, retryAfter: retryAfter)
        }
    }

    /// One answer of the App Store (or of the cache), checked for each transaction.
    public func verify(_ proof: ReceiptProof, transactionIDs: [String], freshness: VerificationFreshness) async -> [String: ReceiptVerdict]
    {
        let outcome = await answer(proof, freshness: freshness)
        var verdicts: [String: ReceiptVerdict] = [:]
        for id in transactionIDs {
            switch outcome {
            case .receipt(let receipt):
                verdicts[id] = Self.check(receipt, RequestedPurchase(productID: nil, transactionID: id), bundleID: bundleID, now: now())
            case .rejected(let reason): verdicts[id] = .invalid(reason)
            case .unavailable(let reason, let retryAfter): verdicts[id] = .unavailable(reason: reason, retryAfter: retryAfter)
            }
        }
        return verdicts
    }

    /// The App Store's answer on a receipt: cached when allowed, else asked once however many wait for it.
    private func answer(_ proof: ReceiptProof, freshness: VerificationFreshness) async -> VerifyReceiptClient.Outcome {
        if freshness == .cachedAllowed, let receipt = cache.value(for: proof.digest) { return .receipt(receipt) }
        let client = self.client
        let text = proof.text
        let outcome = await flights.run(proof.digest) { await client.verify(receiptData: text) }
        if case .receipt(let receipt) = outcome { cache.store(receipt, for: proof.digest) }
        return outcome
    }

    /// What a request asks the receipt to prove.
    struct RequestedPurchase {
        var productID: String?
        var transactionID: String?
    }

    /// Stockroom's checks on a receipt Apple accepted.
    static func check(_ receipt: VerifyReceiptAnswer, _ request: VerificationRequest, bundleID: String, now: Date = Date())
        -> ReceiptVerdict
    {
        check(receipt, RequestedPurchase(productID: request.productID, transactionID: request.transactionID), bundleID: bundleID, now: now)
    }

    static func check(_ receipt: VerifyReceiptAnswer, _ claim: RequestedPurchase, bundleID: String, now: Date) -> ReceiptVerdict {
        guard receipt.bundleID == bundleID else { return .invalid(.bundleMismatch(expected: bundleID, actual: receipt.bundleID)) }
        guard !receipt.inApp.isEmpty else { return .invalid(.emptyReceipt) }
        // Apple's latest view first: it carries refunds made after the receipt was issued.
        var seen = Set<String>()
        let transactions = (receipt.latestReceiptInfo + receipt.inApp).filter { seen.insert($0.transactionID).inserted }

        var chosen: ReceiptTransaction?
        if let transactionID = claim.transactionID {
            guard let match = transactions.first(where: { $0.transactionID == transactionID }) else {
                return .invalid(.transactionNotInReceipt(transactionID))
            }
            if let productID = claim.productID, match.productID != productID {
                return .invalid(.productMismatch(transactionID: transactionID, productID: productID))
            }
            chosen = match
        } else if let productID = claim.productID {
            let purchases = transactions.filter { $0.productID == productID }.sorted { $0.purchaseDate > $1.purchaseDate }
            guard !purchases.isEmpty else { return .invalid(.productNotInReceipt(productID)) }
            // A current purchase if there is one: a renewal, not the lapsed period before it.
            chosen = purchases.first { !$0.isCancelled && !$0.isExpired(at: now) } ?? purchases.first { !$0.isCancelled } ?? purchases[0]
        }
        if let chosen, chosen.isCancelled { return .invalid(.revoked(chosen)) }
        if let chosen, chosen.isExpired(at: now) { return .invalid(.expired(chosen)) }
        if receipt.subscriptionExpired {
            // 21006: Apple says the subscription has ended, whatever our clock says.
            let expired = chosen ?? transactions.max { ($0.expiresDate ?? 0) < ($1.expiresDate ?? 0) } ?? transactions[0]
            return .invalid(.expired(expired))
        }
        return .valid(
            VerifiedReceipt(environment: receipt.environment, bundleID: bundleID, transaction: chosen, transactions: transactions))
    }
}

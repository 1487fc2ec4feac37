import Synchronization

/// Verifies an app receipt for a request: the seam between the download API and Apple.
public protocol ReceiptVerifier: Sendable {
    /// The verdict on `request`; `freshness` says whether a recently cached answer will do.
    func verify(_ request: VerificationRequest, freshness: VerificationFreshness) async -> ReceiptVerdict
}

/// A receipt and what the caller wants it to prove.
public struct VerificationRequest: Sendable, Hashable {
    /// Base64 app receipt.
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

/// The production `ReceiptVerifier`: verifyReceipt with single flight and a short cache, then
/// Stockroom's checks (bundle, product, transaction, cancellation).
public final class AppStoreReceiptVerifier: ReceiptVerifier {
    public let client: VerifyReceiptClient
    public let bundleID: String
    /// How long a valid upstream answer is reused; zero turns the cache off.
    public let cacheInterval: Duration
    private let flights = SingleFlight<VerifyReceiptClient.Outcome>()
    private let cache = Mutex<[String: (receipt: AppleReceipt, expires: ContinuousClock.Instant)]>([:])
    private static let cacheCapacity = 10_000

    public init(client: VerifyReceiptClient, bundleID: String, cacheInterval: Duration = .seconds(300)) {
        self.client = client
        self.bundleID = bundleID
        self.cacheInterval = cacheInterval
    }

    public func verify(_ request: VerificationRequest, freshness: VerificationFreshness = .cachedAllowed) async -> ReceiptVerdict {
        // The receipt's digest, not the receipt, keys the cache: it is shorter and is no secret.
        let key = ByteEncoding.hex(SHA256.hash(Array(request.receiptData.utf8)))
        if freshness == .cachedAllowed, let receipt = cached(key) {
            return Self.check(receipt, request, bundleID: bundleID)
        }
        let client = self.client
        let receiptData = request.receiptData
        let outcome = await flights.run(key) { await client.verify(receiptData: receiptData) }
        switch outcome {
        case .receipt(let receipt):
            store(receipt, key: key)
            return Self.check(receipt, request, bundleID: bundleID)
        case .rejected(let reason):
            return .invalid(reason)
        case .unavailable(let reason, let retryAfter):
            return .unavailable(reason: reason, retryAfter: retryAfter)
        }
    }

    /// Stockroom's checks on a receipt Apple accepted.
    static func check(_ receipt: AppleReceipt, _ request: VerificationRequest, bundleID: String) -> ReceiptVerdict {
        guard receipt.bundleID == bundleID else { return .invalid(.bundleMismatch(expected: bundleID, actual: receipt.bundleID)) }
        guard !receipt.inApp.isEmpty else { return .invalid(.emptyReceipt) }
        // Apple's latest view first: it carries refunds made after the receipt was issued.
        var seen = Set<String>()
        let transactions = (receipt.latestReceiptInfo + receipt.inApp).filter { seen.insert($0.transactionID).inserted }

        var chosen: ReceiptTransaction?
        if let transactionID = request.transactionID {
            guard let match = transactions.first(where: { $0.transactionID == transactionID }) else {
                return .invalid(.transactionNotInReceipt(transactionID))
            }
            if let productID = request.productID, match.productID != productID {
                return .invalid(.productMismatch(transactionID: transactionID, productID: productID))
            }
            chosen = match
        } else if let productID = request.productID {
            let purchases = transactions.filter { $0.productID == productID }.sorted { $0.purchaseDate > $1.purchaseDate }
            guard !purchases.isEmpty else { return .invalid(.productNotInReceipt(productID)) }
            chosen = purchases.first { !$0.isCancelled } ?? purchases[0]
        }
        if let chosen, chosen.isCancelled { return .invalid(.revoked(chosen)) }
        return .valid(VerifiedReceipt(environment: receipt.environment, bundleID: bundleID, transaction: chosen, transactions: transactions))
    }

    private func cached(_ key: String) -> AppleReceipt? {
        cache.withLock { entries in
            guard let entry = entries[key] else { return nil }
            guard entry.expires > .now else {
                entries[key] = nil
                return nil
            }
            return entry.receipt
        }
    }

    private func store(_ receipt: AppleReceipt, key: String) {
        guard cacheInterval > .zero else { return }
        let expires = ContinuousClock.now + cacheInterval
        cache.withLock { entries in
            if entries.count >= Self.cacheCapacity {
                let now = ContinuousClock.now
                entries = entries.filter { $0.value.expires > now }
                if entries.count >= Self.cacheCapacity { entries.removeAll() }
            }
            entries[key] = (receipt, expires)
        }
    }
}

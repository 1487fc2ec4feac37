import StockroomCore

/// A restore request, as the edge parsed it: the proof names the customer, the rest are claims.
public struct RestoreRequest: Sendable, Equatable {
    public var proof: RestoreProof
    /// The app account the request names (StoreKit 2's `appAccountToken`), lower-cased.
    public var appAccountToken: String?
    /// The client's address, for the per-client limit on upstream calls.
    public var client: String
    /// The most history pages followed for this request.
    public var maximumPages: Int

    public init(proof: RestoreProof, appAccountToken: String?, client: String, maximumPages: Int = AppStoreServerAPIClient.historyPageBound)
    {
        self.proof = proof
        self.appAccountToken = appAccountToken?.lowercased()
        self.client = client
        self.maximumPages = maximumPages
    }
}

/// What a restore request shows of the customer.
public enum RestoreProof: Sendable, Equatable {
    /// A StoreKit 2 JWS of any of the customer's transactions: verified like a download's.
    case signedTransaction(String)
    /// A bare transaction ID: restores only what is bound to the request's app account.
    case transactionID(String)
}

/// What the entitlement component decided about a restore.
public enum Restore: Sendable, Equatable {
    /// The history was read whole; what was restored and what was not.
    case restored(RestoreReport)
    case refused(RestoreRefusal)
    /// The App Store could not be asked: nothing was recorded.
    case unavailable(retryAfter: Duration)
    /// This client asked the App Store too often.
    case limited(retryAfter: Duration)
}

/// Why a restore as a whole was refused; nothing was recorded.
public enum RestoreRefusal: Error, Sendable, Equatable {
    /// The signed transaction does not verify, or names another account than the request.
    case proof(Refusal)
    /// A bare transaction ID needs the app account it was bought for.
    case accountRequired
    /// The transaction named by ID is not bound to the request's app account.
    case accountNotBound(String)
    /// The App Store knows no such transaction.
    case unknownTransaction(String)
    /// No App Store Server API credentials: histories cannot be asked for.
    case notConfigured
}

/// Each purchase of a restored history, restored or skipped.
public struct RestoreReport: Sendable, Equatable {
    /// Entitled now, with a download token each, in history order.
    public var restored: [RestoredFulfilment] = []
    /// Not restored, and why.
    public var skipped: [(transactionID: String, productID: String, reason: RestoreSkip)] {
        skips.map { ($0.transactionID, $0.productID, $0.reason) }
    }
    private var skips: [Skip] = []

    public init() {}

    mutating func skip(_ proof: VerifiedProof, _ reason: RestoreSkip) {
        skips.append(Skip(transactionID: proof.transactionID, productID: proof.productID, reason: reason))
    }

    /// How many purchases were skipped for `reason`.
    public func count(_ reason: RestoreSkip) -> Int { skips.filter { $0.reason == reason }.count }

    private struct Skip: Sendable, Equatable {
        var transactionID: String
        var productID: String
        var reason: RestoreSkip
    }
}

/// One purchase a restore made downloadable.
public struct RestoredFulfilment: Sendable, Equatable {
    /// The ledger's row, entitled.
    public var fulfilment: Fulfilment
    /// A download token, as `POST /v1/downloads` issues.
    public var token: String
}

/// Why a purchase in the history was not restored.
public enum RestoreSkip: String, Sendable, Equatable, CaseIterable {
    case notInCatalogue = "not_in_catalogue"
    /// Refunded or revoked, by Apple or an operator.
    case revoked
    case expired
    /// Bound to another app account, or (by bare ID) to none.
    case otherAccount = "other_account"
    case sandboxNotAllowed = "sandbox_not_allowed"
    /// The ledger refused it for another reason.
    case refused
}

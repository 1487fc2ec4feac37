import Foundation

/// A purchase to deliver: what StoreKit handed the app, translated into the core's terms.
///
/// The StoreKit adapters build it from a `Transaction` or an `SKPaymentTransaction`; the tests
/// build it from a simulator purchase.
public struct Purchase: Sendable, Hashable, Codable {
    /// The App Store's product identifier, as in the catalogue.
    public var productID: String
    /// The transaction to deliver: the journal and the server's ledger key on it.
    public var transactionID: String
    /// The first purchase of this product by the customer (equal to `transactionID` except for restores and renewals).
    public var originalTransactionID: String?
    /// What proves the purchase to Stockroom.
    public var proof: Proof
    /// StoreKit 2's `appAccountToken`, binding the purchase to the app's account.
    public var appAccountToken: UUID?
    /// Whether the customer agreed to share consumption data with Apple on a refund request, when the app asked.
    public var consent: Bool?

    public init(
        productID: String, transactionID: String, originalTransactionID: String? = nil, proof: Proof,
        appAccountToken: UUID? = nil, consent: Bool? = nil
    ) {
        self.productID = productID
        self.transactionID = transactionID
        self.originalTransactionID = originalTransactionID
        self.proof = proof
        self.appAccountToken = appAccountToken
        self.consent = consent
    }
}

/// The three proofs of purchase Stockroom accepts.
public enum Proof: Sendable, Hashable, Codable {
    /// A StoreKit 2 signed transaction
    /// ([`jwsRepresentation`](https://developer.apple.com/documentation/storekit/verificationresult/jwsrepresentation-21vgo)).
    case signedTransaction(String)
    /// The app receipt's bytes (`Bundle.main.appStoreReceiptURL`), not base64.
    case appReceipt(Data)
    /// An iOS 6 transaction receipt (`SKPaymentTransaction.transactionReceipt`), not base64.
    case transactionReceipt(Data)

    /// The fields of `POST /v1/downloads` that carry this proof.
    var requestFields: [String: String] {
        switch self {
        case .signedTransaction(let jws): ["signedTransaction": jws]
        case .appReceipt(let bytes), .transactionReceipt(let bytes): ["receiptData": bytes.base64EncodedString()]
        }
    }

    /// A receipt can be refreshed (`SKReceiptRefreshRequest`); a signed transaction cannot.
    var isReceipt: Bool {
        if case .signedTransaction = self { return false }
        return true
    }
}

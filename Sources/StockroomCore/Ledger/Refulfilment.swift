import Foundation

/// An operator's re-fulfilment: re-verify a transaction's stored receipt upstream (never from the
/// cache) and move its state: pending/rejected → verified, or → rejected / revoked.
public struct Refulfilment: Sendable {
    public let ledger: any Ledger
    public let verifier: any ReceiptVerifier
    /// For StoreKit 2 transactions: the JWS verifier and, when configured, the Server API.
    public let signedTransactions: SignedTransactionVerifier?
    public let serverAPI: AppStoreServerAPIClient?

    public init(
        ledger: any Ledger, verifier: any ReceiptVerifier, signedTransactions: SignedTransactionVerifier? = nil,
        serverAPI: AppStoreServerAPIClient? = nil
    ) {
        self.ledger = ledger
        self.verifier = verifier
        self.signedTransactions = signedTransactions
        self.serverAPI = serverAPI
    }

    /// What re-verification did (or, in a dry run, would do) to one transaction.
    public struct Outcome: Sendable {
        public enum Kind: String, Sendable {
            case verified, rejected, revoked, unavailable
            /// The verdict would move the transaction somewhere the state machine forbids.
            case unchanged
        }

        public var kind: Kind
        public var transactionID: String
        public var before: FulfilmentState
        public var after: FulfilmentState
        public var detail: String
    }

    public func refulfil(_ transactionID: String, dryRun: Bool = false) async throws -> Outcome {
        guard let row = try await ledger.fulfilment(transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
        func outcome(_ kind: Outcome.Kind, _ after: FulfilmentState, _ detail: String) -> Outcome {
            Outcome(kind: kind, transactionID: transactionID, before: row.state, after: after, detail: detail)
        }
        guard row.proofKind == .receipt else {
            guard let serverAPI, let signedTransactions else {
                return outcome(.unavailable, row.state, "signed transactions are re-verified through the App Store Server API, which has no credentials here")
            }
            switch await serverAPI.transaction(transactionID) {
            case .found(let info, let environment):
                switch signedTransactions.verify(info) {
                case .success(let transaction) where transaction.isRevoked:
                    if !dryRun { _ = try await ledger.revokePurchase(originalTransactionID: transaction.originalTransactionId, reason: "refunded (App Store Server API)") }
                    return outcome(.revoked, .revoked, "refunded or revoked")
                case .success(let transaction):
                    if !dryRun {
                        _ = try await ledger.recordVerified(
                            VerifiedRecord(
                                transactionID: transactionID, originalTransactionID: transaction.originalTransactionId, productID: row.productID,
                                bundleID: row.bundleID, environment: environment, proofKind: .signedTransaction, proof: info),
                            countAttempt: false)
                    }
                    return outcome(.verified, row.state.isEntitled ? row.state : .verified, "the App Store Server API vouches for it (\(environment.rawValue))")
                case .failure(let failure):
                    return outcome(.unavailable, row.state, "the API's signed transaction does not verify: \(failure)")
                }
            case .notFound:
                guard row.state.allowedNext.contains(.rejected) else { return outcome(.unchanged, row.state, "unknown to the App Store Server API") }
                if !dryRun { _ = try await ledger.transition(transactionID, to: .rejected, error: "unknown to the App Store Server API") }
                return outcome(.rejected, .rejected, "unknown to the App Store Server API")
            case .unavailable(let reason, _):
                if !dryRun { _ = try await ledger.transition(transactionID, to: row.state, error: reason) }
                return outcome(.unavailable, row.state, reason)
            }
        }
        let verdict = await verifier.verify(
            VerificationRequest(receiptData: row.proof, productID: row.productID, transactionID: row.transactionID), freshness: .upstreamOnly)
        switch verdict {
        case .valid(let receipt):
            let after: FulfilmentState = row.state.isEntitled ? row.state : .verified
            if !dryRun, let transaction = receipt.transaction {
                _ = try await ledger.recordVerified(
                    VerifiedRecord(
                        transactionID: row.transactionID, originalTransactionID: transaction.originalTransactionID,
                        productID: row.productID, bundleID: row.bundleID, environment: receipt.environment,
                        proofKind: row.proofKind, proof: row.proof),
                    countAttempt: false)
            }
            return outcome(.verified, after, "the App Store vouches for it (\(receipt.environment.rawValue))")
        case .invalid(.revoked(let transaction)):
            if !dryRun { _ = try await ledger.revokePurchase(originalTransactionID: transaction.originalTransactionID, reason: "refunded (re-fulfilment)") }
            return outcome(.revoked, .revoked, "refunded or revoked")
        case .invalid(let reason):
            guard row.state == .rejected || row.state.allowedNext.contains(.rejected) else {
                return outcome(.unchanged, row.state, "\(reason); left \(row.state.rawValue), which cannot become rejected")
            }
            if !dryRun { _ = try await ledger.transition(transactionID, to: .rejected, error: reason.description) }
            return outcome(.rejected, .rejected, "\(reason.code): \(reason)")
        case .unavailable(let reason, _):
            if !dryRun { _ = try await ledger.transition(transactionID, to: row.state, error: reason) }
            return outcome(.unavailable, row.state, reason)
        }
    }

    /// Revokes a transaction and every other transaction of its purchase (restores).
    public func revoke(_ transactionID: String, reason: String) async throws -> [Fulfilment] {
        guard let row = try await ledger.fulfilment(transactionID) else { throw LedgerError.unknownTransaction(transactionID) }
        return try await ledger.revokePurchase(originalTransactionID: row.originalTransactionID, reason: "revoked by operator: \(reason)")
    }
}

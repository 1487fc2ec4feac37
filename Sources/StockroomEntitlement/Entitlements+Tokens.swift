import Foundation
import StockroomCore

/// Requests authorised by a download token: resume, status, acknowledge.
extension Entitlements {
    /// What a bearer token proves about `transactionID`.
    public func authorize(_ transactionID: String, bearer: String?) -> Result<(productID: String, expired: Bool), Refusal> {
        guard let bearer, !bearer.isEmpty else { return .failure(.tokenMissing) }
        switch tokens.check(bearer, transactionID: transactionID, now: now()) {
        case .valid(let product): return .success((product, false))
        case .expired(let product): return .success((product, true))
        case .invalid: return .failure(.tokenInvalid)
        }
    }

    /// A resume: an unexpired token, and an entitlement that still stands (one ledger write).
    public func resume(_ transactionID: String, bearer: String?) async throws -> Result<Fulfilment, Refusal> {
        let productID: String
        switch authorize(transactionID, bearer: bearer) {
        case .failure(let refusal): return .failure(refusal)
        case .success((_, true)): return .failure(.tokenExpired)
        case .success((let product, false)): productID = product
        }
        switch try await ledger.resume(transactionID, productID: productID, now: now()) {
        case .entitled(let row): return .success(row)
        case .refused(let refusal): return .failure(refusal)
        }
    }

    /// When an authentic token stops authorising content (a presigned URL must not outlive it).
    public func expiry(of token: String) -> Date? {
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, let seconds = Int64(parts[1]) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(seconds))
    }

    /// The transaction as its token's holder may see it; an expired token will do.
    public func status(_ transactionID: String, bearer: String?) async throws -> Result<Fulfilment, Refusal> {
        let productID: String
        switch authorize(transactionID, bearer: bearer) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let granted): productID = granted.productID
        }
        guard let row = try await ledger.fulfilment(transactionID), row.productID == productID else {
            return .failure(.unknownTransaction(transactionID))
        }
        if row.state == .revoked { return .failure(.revoked(transactionID: transactionID)) }
        return .success(row)
    }

    /// The client has the whole file: delivered → acknowledged (one ledger write). With
    /// `handedOff` the bytes came from an object store by presigned redirect, and this records
    /// the delivery too.
    public func acknowledge(_ transactionID: String, bearer: String?, handedOff: Bool = false) async throws -> Result<Fulfilment, Refusal> {
        let productID: String
        switch authorize(transactionID, bearer: bearer) {
        case .failure(let refusal): return .failure(refusal)
        case .success(let granted): productID = granted.productID
        }
        switch try await ledger.acknowledge(transactionID, productID: productID, handedOff: handedOff, now: now()) {
        case .entitled(let row):
            // The acknowledgement may have queued Finish Transaction in the same write.
            if row.finishedAt == nil { serverCallQueued() }
            return .success(row)
        case .refused(let refusal): return .failure(refusal)
        }
    }
}

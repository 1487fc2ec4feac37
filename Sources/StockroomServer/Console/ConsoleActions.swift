import Foundation
import StockroomCore
import StockroomEntitlement

/// The console's three actions on a fulfilment, each one `Entitlements` call, as the admin API
/// makes it; then 303 back to the fulfilment's page with what happened.
struct ConsoleActions: Sendable {
    /// The actions, by the last segment of their path.
    enum Kind: String, Sendable, CaseIterable {
        case refulfil, revoke, reinstate
    }

    /// Reasons past this many characters are refused (400).
    static let maximumReasonLength = LedgerEvent.detailLimit

    let entitlements: Entitlements

    func perform(_ kind: Kind, on transactionID: String, form: ConsoleForm) async throws -> ConsoleResponse {
        let flash: ConsoleFlash
        do {
            switch kind {
            case .refulfil:
                flash = ConsoleFlash(reverification: try await entitlements.refulfil(transactionID).kind)
            case .revoke:
                let changed = try await entitlements.revoke(transactionID, reason: try Self.reason(form))
                flash = changed.isEmpty ? .revokeUnchanged : .revoked
            case .reinstate:
                let lifted = try await entitlements.reinstate(transactionID, reason: try Self.reason(form))
                flash = lifted.isEmpty ? .reinstateUnchanged : .reinstated
            }
        } catch LedgerError.unknownTransaction {
            throw ConsoleError.unknownTransaction(transactionID)
        }
        return .redirect(to: "/console/fulfilments/\(transactionID)?done=\(flash.rawValue)")
    }

    /// The form's `reason`: required, at most `maximumReasonLength` characters.
    static func reason(_ form: ConsoleForm) throws -> String {
        let reason = (form["reason"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        guard !reason.isEmpty else { throw ConsoleError.badRequest("Give a reason: it is kept in the ledger with the change.") }
        guard reason.unicodeScalars.count <= maximumReasonLength else {
            throw ConsoleError.badRequest("The reason is longer than \(maximumReasonLength) characters.")
        }
        guard !reason.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw ConsoleError.badRequest("The reason may not hold control characters.")
        }
        return reason
    }
}

/// What the last action did, carried in the redirect's `?done=` as one of a fixed set: the
/// page shows its own words for it, never text from the URL.
enum ConsoleFlash: String, Sendable, CaseIterable {
    case refulfilVerified = "refulfil-verified", refulfilRejected = "refulfil-rejected", refulfilRevoked = "refulfil-revoked"
    case refulfilExpired = "refulfil-expired", refulfilUnavailable = "refulfil-unavailable", refulfilUnchanged = "refulfil-unchanged"
    case revoked, revokeUnchanged = "revoke-unchanged", reinstated, reinstateUnchanged = "reinstate-unchanged"

    init(reverification kind: Reverification.Kind) {
        switch kind {
        case .verified: self = .refulfilVerified
        case .rejected: self = .refulfilRejected
        case .revoked: self = .refulfilRevoked
        case .expired: self = .refulfilExpired
        case .unavailable: self = .refulfilUnavailable
        case .unchanged: self = .refulfilUnchanged
        }
    }

    var message: String {
        switch self {
        case .refulfilVerified: "Re-fulfilled: the App Store vouches for it; it can be downloaded."
        case .refulfilRejected: "Re-verified: the App Store refused the stored proof; the transaction is rejected."
        case .refulfilRevoked: "Re-verified: the purchase was refunded or revoked."
        case .refulfilExpired: "Re-verified: the subscription has expired."
        case .refulfilUnavailable: "The App Store could not be reached; nothing changed. Try again later."
        case .refulfilUnchanged: "Re-verified: nothing changed (a revocation stays until it is lifted)."
        case .revoked: "Revoked: the purchase can no longer be downloaded."
        case .revokeUnchanged: "Nothing to revoke: the purchase was already revoked."
        case .reinstated: "Reinstated: the operator's revocation is lifted."
        case .reinstateUnchanged: "Nothing was reinstated: only an operator's revocation can be lifted here."
        }
    }
}

import StockroomCore

/// What an operator's re-verification did (or, in a dry run, would do) to one proof.
public struct Reverification: Sendable, Equatable, Encodable {
    public enum Kind: String, Sendable, CaseIterable, Encodable {
        case verified, rejected, revoked, expired, unavailable
        /// The verdict changed nothing (a revoked purchase stays revoked, say).
        case unchanged
    }

    public var kind: Kind
    public var transactionID: String
    /// The state before and after: a fulfilment state, or `pending` for a kept proof.
    public var before: String
    public var after: String
    public var detail: String

    public init(kind: Kind, transactionID: String, before: String, after: String, detail: String) {
        self.kind = kind
        self.transactionID = transactionID
        self.before = before
        self.after = after
        self.detail = detail
    }

    /// One outcome for a transaction whose several kept proofs were verified: the one that
    /// decided the most (an entitlement first), counting the others; nil for none.
    public static func summary(of outcomes: [Reverification]) -> Reverification? {
        let rank: [Kind] = [.verified, .revoked, .expired, .rejected, .unavailable, .unchanged]
        guard var chosen = outcomes.min(by: { (rank.firstIndex(of: $0.kind) ?? rank.count) < (rank.firstIndex(of: $1.kind) ?? rank.count) })
        else {
            return nil
        }
        if outcomes.count > 1 { chosen.detail += " (\(outcomes.count) kept proofs verified)" }
        return chosen
    }

    /// As the CLI's `--json` and the admin API show it.
    enum CodingKeys: String, CodingKey {
        case transactionID = "transactionId"
        case kind = "outcome"
        case before, after, detail
    }
}

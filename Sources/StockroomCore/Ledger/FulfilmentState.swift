/// Where a transaction stands (docs/contract.md, "The states of a purchase").
///
/// pending → verified → delivered → acknowledged, or rejected / revoked. A change not listed in
/// `allowedNext` is refused in code; the schema's CHECK refuses unknown states.
public enum FulfilmentState: String, Sendable, Codable, CaseIterable {
    /// Receipt stored, not verified yet (upstream was unavailable).
    case pending
    /// Entitled, not fully delivered.
    case verified
    /// A whole copy went out.
    case delivered
    /// The client confirmed it has the content: safe to finish the transaction.
    case acknowledged
    /// Upstream said no.
    case rejected
    /// Refunded or revoked.
    case revoked

    /// The states this one may move to.
    public var allowedNext: Set<FulfilmentState> {
        switch self {
        case .pending: [.verified, .rejected, .revoked]
        case .verified: [.delivered, .rejected, .revoked]
        case .delivered: [.acknowledged, .revoked]
        case .acknowledged: [.revoked]
        case .rejected: [.verified, .revoked]  // an operator's re-fulfilment found it valid
        case .revoked: [.verified]  // a refund reversed
        }
    }

    /// Whether content may be served in this state.
    public var isEntitled: Bool { [.verified, .delivered, .acknowledged].contains(self) }

    /// Whether the app may call `finishTransaction`: the content is confirmed on the device, or
    /// there is nothing left to deliver.
    public var isSafeToFinish: Bool { [.acknowledged, .rejected, .revoked].contains(self) }
}

/// One event a change of a row reports: its type, why (an operator's or Apple's reason), and
/// whose revocation it is about.
public struct EventChange: Sendable, Equatable {
    public var type: LedgerEvent.EventType
    public var detail: String?
    public var cause: RevocationCause?

    public init(_ type: LedgerEvent.EventType, detail: String? = nil, cause: RevocationCause? = nil) {
        (self.type, self.detail, self.cause) = (type, detail, cause)
    }
}

extension LedgerEvent {
    /// The events a change of one transaction's row from `before` (nil: a new row) to `after`
    /// reports, in the order they happened; `restoring` names a proof's entitlement a restore.
    ///
    /// Each crossed step of the state is its own event (a handed-off acknowledgement is
    /// delivered, then acknowledged), and so is each cause of a revocation that is set or lifted,
    /// whatever the state was: a refund of a purchase an operator had revoked is `refunded`, an
    /// operator's revocation of a refunded one `revoked`, and one cause lifted while the other
    /// stands `revocation_lifted` (the purchase stays revoked).
    public static func changes(from before: Fulfilment?, to after: Fulfilment, restoring: Bool) -> [EventChange] {
        let old = before?.state
        let set = (
            refund: after.revokedByRefundAt != nil && before?.revokedByRefundAt == nil,
            byOperator: after.revokedByOperatorAt != nil && before?.revokedByOperatorAt == nil
        )
        let lifted = (
            refund: before?.revokedByRefundAt != nil && after.revokedByRefundAt == nil,
            byOperator: before?.revokedByOperatorAt != nil && after.revokedByOperatorAt == nil
        )
        switch after.state {
        case .revoked:
            var changes: [EventChange] = []
            if set.refund { changes.append(EventChange(.refunded, detail: after.lastError, cause: .refund)) }
            if set.byOperator { changes.append(EventChange(.revoked, detail: after.lastError, cause: .operatorAction)) }
            if changes.isEmpty, old != .revoked {
                // Revoked with no cause stamped (a row from before the causes were kept).
                changes.append(EventChange(.refunded, detail: after.lastError, cause: after.revokedByOperatorAt == nil ? .refund : nil))
            }
            if lifted.refund {
                changes.append(
                    EventChange(.revocationLifted, detail: "the refund was reversed; the operator's revocation stands", cause: .refund))
            }
            if lifted.byOperator {
                changes.append(
                    EventChange(
                        .revocationLifted, detail: "the operator's revocation was lifted; the refund stands", cause: .operatorAction))
            }
            return changes
        case .rejected:
            return old == .rejected ? [] : [EventChange(.rejected, detail: after.lastError)]
        case .pending:
            return []
        case .verified, .delivered, .acknowledged:
            guard old != after.state else { return [] }
            var changes: [EventChange] = []
            let progress: [FulfilmentState] = [.verified, .delivered, .acknowledged]
            let reached = progress.firstIndex(of: after.state)!
            var from = old.flatMap { progress.firstIndex(of: $0) }.map { $0 + 1 } ?? 0
            if old == .revoked {
                changes.append(EventChange(.reinstated, detail: after.lastError, cause: lifted.refund ? .refund : .operatorAction))
                from = 1
            } else if from == 0 {
                changes.append(EventChange(restoring ? .restored : .verified))
                from = 1
            }
            guard from <= reached else { return changes }
            for step in progress[from...reached] {
                changes.append(EventChange(step == .delivered ? .delivered : .acknowledged))
            }
            return changes
        }
    }
}

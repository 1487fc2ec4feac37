public import StockroomCore

extension ServerConfiguration {
    /// The bounds on unverified proofs that `maxPendingProofs`, `maxPendingProofsPerClient`,
    /// `maxPendingProofSize` and `rejectedProofRetention` set.
    public var pendingProofBounds: PendingProofBounds {
        PendingProofBounds(
            total: maxPendingProofs, perClient: maxPendingProofsPerClient, maximumProofBytes: maxPendingProofSize,
            rejectedRetention: rejectedProofRetention)
    }
}

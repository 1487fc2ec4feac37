import Foundation

/// What Stockroom tells Apple about a refund request, from what the ledger knows: Apple's
/// `ConsumptionRequest`, or nothing at all when the ledger cannot tell how the delivery went.
/// A consumption answer speaks for the developer with money at stake: it states only what the
/// ledger's record of the delivery supports (README, "What a consumption answer says").
///
/// See https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest
public enum ConsumptionAnswer: Sendable, Equatable {
    /// The record supports this answer: send it (with the customer's consent on record).
    case send(ConsumptionInformation)
    /// The record cannot tell: no answer goes to Apple, and the call is recorded skipped with
    /// `reason`.
    case withhold(reason: String)

    /// The record may soon tell (a download is under way): ask again later; past Apple's
    /// window the call is recorded skipped with `reason`.
    case notYet(reason: String)

    /// The answer for `row` (nil: the transaction never reached the ledger) and its `product`,
    /// in this order:
    ///
    /// - `DELIVERED` once every byte of the file went out (`deliveredAt`: the row's `sentBytes`
    ///   covered it) or the app acknowledged it, even if revoked since;
    /// - nothing (`withhold`) once a presigned URL handed the object store the download and the
    ///   app never acknowledged: the store sent the bytes, and only the app can say they arrived;
    /// - `UNDELIVERED_SERVER_OUTAGE` only when Stockroom's own failure stopped the delivery: a
    ///   proof kept because the App Store could not be asked (for a transaction with no
    ///   entitlement on record), or a latest attempt that ended by a failure of Stockroom's side
    ///   (the store unreachable, bytes failing their check) while asking for bytes not yet sent;
    /// - nothing yet (`notYet`) while an attempt is under way (it has not reported its end);
    /// - nothing (`withhold`) for a row that downloaded before the ledger kept its bytes;
    /// - `UNDELIVERED_OTHER` only when no byte went out;
    /// - nothing (`withhold`) otherwise: some but not all bytes went out and the client, not
    ///   Stockroom, ended the last attempt.
    ///
    /// `consumptionPercentage` is 0 when nothing was delivered (Apple refuses anything else then)
    /// and is left out when it is not known; never sent for auto-renewable subscriptions.
    public static func build(
        row: Fulfilment?, pendingProof: Bool, product: Product?, refundPreference: ConsumptionInformation.RefundPreference?
    ) -> ConsumptionAnswer {
        func answer(_ status: ConsumptionInformation.DeliveryStatus) -> ConsumptionAnswer {
            let percentage: Int? = status != .delivered && product?.type != .autoRenewable ? 0 : nil
            return .send(
                ConsumptionInformation(
                    customerConsented: row?.customerConsented == true, deliveryStatus: status,
                    sampleContentProvided: product?.sampleContentProvided ?? false, consumptionPercentage: percentage,
                    refundPreference: refundPreference))
        }
        guard let row else { return answer(pendingProof ? .undeliveredServerOutage : .undeliveredOther) }
        if row.deliveredAt != nil { return answer(.delivered) }
        if let handedOff = row.handedOffAt {
            return .withhold(
                reason: "a presigned URL handed the object store the download (\(RFC3339.utc(handedOff))) and the app never "
                    + "acknowledged it: the ledger cannot tell whether the bytes arrived")
        }
        // A proof kept while the App Store was down is any stranger's claim to this transaction:
        // it speaks for a purchase only when no entitlement is on record.
        if (pendingProof && !row.state.isEntitled) || row.lastDeliveryEnding == .server { return answer(.undeliveredServerOutage) }
        guard let sent = row.sentBytes else {
            if row.attempts == 0, row.bytesDelivered == 0 { return answer(.undeliveredOther) }
            return .withhold(
                reason: "downloaded before the ledger kept which bytes went out (schema v12): the ledger cannot tell how much arrived")
        }
        if row.attempts > 0, row.lastDeliveryEnding == nil {
            return .notYet(reason: "a download attempt has not reported its end (under way, or cut off unrecorded)")
        }
        if sent.isEmpty, row.bytesDelivered == 0 { return answer(.undeliveredOther) }
        let size = product.map { " of \($0.size)" } ?? ""
        return .withhold(
            reason: "\(sent.count)\(size) bytes went out (\(sent.isEmpty ? "none of this version" : sent.description)) and no failure "
                + "of Stockroom's ended the delivery: the ledger cannot tell whether the customer has the content")
    }
}

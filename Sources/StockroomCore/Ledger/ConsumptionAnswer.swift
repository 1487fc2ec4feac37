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

    /// The answer for `row` (nil: the transaction never reached the ledger) and its `product`.
    ///
    /// - `DELIVERED` once every byte of the file went out (`deliveredAt`: the row's `sentBytes`
    ///   covered it) or the app acknowledged it, even if revoked since;
    /// - `UNDELIVERED_SERVER_OUTAGE` only when Stockroom's own failure stopped the delivery: a
    ///   proof kept because the App Store could not be asked, or a latest download attempt that
    ///   ended by a failure of Stockroom's side (the store unreachable, bytes failing their check);
    /// - `UNDELIVERED_OTHER` only when no byte went out;
    /// - nothing (`withhold`) otherwise: a presigned URL handed the object store the bytes and the
    ///   app never acknowledged; some but not all bytes went out and the client, not Stockroom,
    ///   ended the last attempt; or the row downloaded before the ledger kept its bytes.
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
        if pendingProof || row.lastDeliveryEnding == .server { return answer(.undeliveredServerOutage) }
        if let handedOff = row.handedOffAt {
            return .withhold(
                reason: "a presigned URL handed the object store the download (\(RFC3339.utc(handedOff))) and the app never "
                    + "acknowledged it: the ledger cannot tell whether the bytes arrived")
        }
        guard let sent = row.sentBytes else {
            if row.attempts == 0, row.bytesDelivered == 0 { return answer(.undeliveredOther) }
            return .withhold(
                reason: "downloaded before the ledger kept which bytes went out (schema v12): the ledger cannot tell how much arrived")
        }
        if sent.isEmpty, row.bytesDelivered == 0 { return answer(.undeliveredOther) }
        let size = product.map { " of \($0.size)" } ?? ""
        return .withhold(
            reason: "\(sent.count)\(size) bytes went out (\(sent.isEmpty ? "none whole" : sent.description)) and no failure of "
                + "Stockroom's ended the delivery: the ledger cannot tell whether the customer has the content")
    }
}

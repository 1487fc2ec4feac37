import Foundation

/// The consumption answer for a refund request, built from what the ledger knows: Apple's
/// `ConsumptionRequest`, sent only with the customer's consent on record.
///
/// See https://developer.apple.com/documentation/appstoreserverapi/consumptionrequest
public enum ConsumptionAnswer {
    /// The answer for `row` (nil: the transaction never reached the ledger).
    ///
    /// - `DELIVERED` once a whole copy went out (delivered or acknowledged, even if later revoked);
    /// - `UNDELIVERED_SERVER_OUTAGE` when the failure was ours: a proof still pending because the
    ///   App Store could not be asked, or downloads that started and never completed;
    /// - `UNDELIVERED_OTHER` otherwise, and whenever the object store sends the bytes
    ///   (`contentHandedOff`, `--content-delivery redirect`): Stockroom handed out a URL and cannot
    ///   tell whether the download failed, so it never claims an outage of its own.
    /// `consumptionPercentage` is 0 when nothing was delivered (Apple refuses anything else then)
    /// and is left out when it is not known; never for auto-renewable subscriptions.
    public static func build(
        row: Fulfilment?, pendingProof: Bool, product: Product?, refundPreference: ConsumptionInformation.RefundPreference?,
        contentHandedOff: Bool = false
    ) -> ConsumptionInformation {
        let status: ConsumptionInformation.DeliveryStatus
        if row?.deliveredAt != nil {
            status = .delivered
        } else if pendingProof || (!contentHandedOff && (row.map { $0.state.isEntitled && $0.attempts > 0 } ?? false)) {
            status = .undeliveredServerOutage
        } else {
            status = .undeliveredOther
        }
        let percentage: Int? = status != .delivered && product?.type != .autoRenewable ? 0 : nil
        return ConsumptionInformation(
            customerConsented: row?.customerConsented == true, deliveryStatus: status,
            sampleContentProvided: product?.sampleContentProvided ?? false, consumptionPercentage: percentage,
            refundPreference: refundPreference)
    }
}

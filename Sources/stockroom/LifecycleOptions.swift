import ArgumentParser
import Foundation
import StockroomCore
import StockroomEntitlement
import StockroomServer

/// The purchase lifecycle's settings (`serve` only), each also read from `STOCKROOM_<NAME>`.
/// They act only with App Store Server API credentials (or the simulator).
struct LifecycleOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            """
            When Stockroom calls Finish Transaction itself: acknowledged (the app confirmed it has the content), delivered (a whole \
            copy went out), or off (STOCKROOM_FINISH_ON; default acknowledged).
            """,
            valueName: "acknowledged|delivered|off"))
    var finishOn: String?

    @Option(
        help: ArgumentHelp(
            """
            The refund outcome to tell Apple when it asks for consumption information: none, decline, grant-full, grant-prorated \
            (STOCKROOM_REFUND_PREFERENCE; default none).
            """,
            valueName: "preference"))
    var refundPreference: String?

    @Option(
        help: ArgumentHelp(
            """
            What a prorated refund (REFUND with revocationType REFUND_PRORATED) does: revoke the content, or keep it \
            (STOCKROOM_PRORATED_REFUND; default revoke).
            """,
            valueName: "revoke|keep"))
    var proratedRefund: String?

    func apply(to configuration: inout ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment) throws {
        if let text = finishOn ?? environment["STOCKROOM_FINISH_ON"] {
            switch text {
            case "off": configuration.finishOn = nil
            default:
                guard let trigger = FinishTrigger(rawValue: text) else {
                    throw ValidationError("--finish-on must be acknowledged, delivered or off, not \"\(text)\"")
                }
                configuration.finishOn = trigger
            }
        }
        if let text = refundPreference ?? environment["STOCKROOM_REFUND_PREFERENCE"] {
            let preferences: [String: ConsumptionInformation.RefundPreference?] = [
                "none": nil, "decline": .decline, "grant-full": .grantFull, "grant-prorated": .grantProrated,
            ]
            guard let preference = preferences[text] else {
                throw ValidationError("--refund-preference must be none, decline, grant-full or grant-prorated, not \"\(text)\"")
            }
            configuration.refundPreference = preference
        }
        if let text = proratedRefund ?? environment["STOCKROOM_PRORATED_REFUND"] {
            guard let policy = ProratedRefundPolicy(rawValue: text) else {
                throw ValidationError("--prorated-refund must be revoke or keep, not \"\(text)\"")
            }
            configuration.proratedRefund = policy
        }
    }
}

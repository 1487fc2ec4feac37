import Foundation
import StockroomCore

/// Finish Transaction and Send Consumption Information, as the App Store Server API answers
/// them, and what the simulator then knows about the transaction (`GET /sim/transactions/{id}`).
extension SimulatorState {
    /// An App Store Server API answer: status and JSON body.
    typealias APIAnswer = (status: Int, body: [String: Any])

    /// An answer as sent: the status and the JSON bytes (none for an empty object).
    struct WireAnswer: Sendable {
        var status: Int
        var body: [UInt8]

        init(_ answer: APIAnswer) {
            status = answer.status
            body =
                answer.body.isEmpty
                ? [] : Array((try? JSONSerialization.data(withJSONObject: answer.body, options: [.withoutEscapingSlashes])) ?? Data())
        }
    }

    /// The transaction `id` in `environment` when the bearer token is good; else Apple's 401,
    /// 400 4000006 (not a transaction ID) or 404 4040010.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/error-codes
    func authorizedTransaction(_ id: String, authorization: String?, environment: StoreEnvironment) -> Result<
        SimulatedTransaction, AppleAPIError
    > {
        let bundleID = transactions[id]?.bundleID ?? configuration.bundleID
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: bundleID) {
            return .failure(AppleAPIError(401, 4_010_000, problem))
        }
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return .failure(AppleAPIError(400, 4_000_006, "Invalid transaction id."))
        }
        guard let transaction = transactions[id], transaction.environment == environment else {
            return .failure(AppleAPIError(404, 4_040_010, "Transaction id not found."))
        }
        return .success(transaction)
    }

    /// `POST /inApps/v1/transactions/{id}/finish`: 200 and the transaction is finished; a
    /// second finish keeps the first date.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/finish-transaction
    func finish(_ id: String, authorization: String?, environment: StoreEnvironment) -> WireAnswer {
        switch authorizedTransaction(id, authorization: authorization, environment: environment) {
        case .failure(let error): return WireAnswer(error.answer)
        case .success(var transaction):
            if transaction.finishedDateMilliseconds == nil { transaction.finishedDateMilliseconds = AppleDate.nowMilliseconds() }
            transactions[id] = transaction
            return WireAnswer((200, [:]))
        }
    }

    /// `PUT /inApps/v2/transactions/consumption/{id}`: 202 when `body` is a `ConsumptionRequest`
    /// Apple would take (kept verbatim and counted), else Apple's 400.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information
    func consume(_ id: String, body: [UInt8], authorization: String?, environment: StoreEnvironment) -> WireAnswer {
        switch authorizedTransaction(id, authorization: authorization, environment: environment) {
        case .failure(let error): return WireAnswer(error.answer)
        case .success(var transaction):
            if let refusal = ConsumptionRules.refusal(of: body, productType: transaction.type) { return WireAnswer(refusal.answer) }
            transaction.consumption = body
            transaction.consumptionAnswers += 1
            transactions[id] = transaction
            return WireAnswer((202, [:]))
        }
    }

    /// What Apple would know about `id`: `GET /sim/transactions/{id}`.
    func transactionView(_ id: String) throws(SimulatorError) -> [UInt8] {
        guard let transaction = transactions[id] else { throw .unknownTransaction(id) }
        var view: [String: Any] = [
            "transactionId": transaction.transactionID, "originalTransactionId": transaction.originalTransactionID,
            "productId": transaction.productID, "bundleId": transaction.bundleID, "type": transaction.type,
            "environment": transaction.environment.rawValue, "deviceId": transaction.deviceID,
            "purchaseDate": transaction.purchaseDateMilliseconds,
            "finished": transaction.finishedDateMilliseconds != nil, "consumptionAnswers": transaction.consumptionAnswers,
            "revoked": transaction.cancellationDateMilliseconds != nil,
        ]
        view["finishedDate"] = transaction.finishedDateMilliseconds
        view["consumption"] = transaction.consumption.flatMap { try? JSONSerialization.jsonObject(with: Data($0)) }
        view["revocationDate"] = transaction.cancellationDateMilliseconds
        view["revocationReason"] = transaction.cancellationReason.flatMap { Int($0) }
        view["revocationType"] = transaction.revocationType
        view["revocationPercentage"] = transaction.revocationPercentage
        view["expiresDate"] = transaction.expiresDateMilliseconds
        view["appAccountToken"] = transaction.appAccountToken
        return Array((try? JSONSerialization.data(withJSONObject: view, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data())
    }

    /// Revokes `id` as a REFUND or REVOKE notification says (keeping an earlier date), or
    /// lifts it for REFUND_REVERSED. `percentage` is milliunits, for `REFUND_PRORATED`.
    func applyRevocation(of type: String, to id: String, revocationType: String?, percentage: Int?) {
        guard var transaction = transactions[id] else { return }
        switch type {
        case "REFUND", "REVOKE":
            if transaction.cancellationDateMilliseconds == nil {
                transaction.cancellationDateMilliseconds = AppleDate.nowMilliseconds()
                transaction.cancellationReason = "0"
            }
            transaction.revocationType = revocationType ?? (type == "REVOKE" ? "FAMILY_REVOKE" : "REFUND_FULL")
            transaction.revocationPercentage = transaction.revocationType == "REFUND_PRORATED" ? percentage : nil
        case "REFUND_REVERSED":
            transaction.cancellationDateMilliseconds = nil
            transaction.cancellationReason = nil
            transaction.revocationType = nil
            transaction.revocationPercentage = nil
        default:
            return
        }
        transactions[id] = transaction
    }
}

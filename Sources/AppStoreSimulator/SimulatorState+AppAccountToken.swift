import Foundation
import StockroomCore

/// Set App Account Token, as the App Store Server API answers it: the purchase's every
/// transaction, and every later one of it, then carries the token wherever Apple signs it.
extension SimulatorState {
    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken` with an
    /// `UpdateAppAccountTokenRequest`: 200 and the token set (or replaced) on the purchase; 401
    /// for a bad bearer token; 400 4000006 for an ID that is no transaction ID, 400 without an
    /// error code for a body that is no request, 400 4000183 for a token that is no UUID, 400
    /// 4000187 for a transaction ID that is not an original one; 404 4040005 for a purchase this
    /// environment does not know.
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/set-app-account-token
    func setAppAccountToken(_ id: String, body: [UInt8], authorization: String?, environment: StoreEnvironment) -> WireAnswer {
        let bundleID = transactions[id]?.bundleID ?? configuration.bundleID
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: bundleID) {
            return WireAnswer(AppleAPIError(401, 4_010_000, problem).answer)
        }
        guard (1...64).contains(id.utf8.count), id.utf8.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return WireAnswer(AppleAPIError(400, 4_000_006, "Invalid transaction id.").answer)
        }
        guard JSONNesting.isShallow(body), let request = try? JSONDecoder().decode(UpdateAppAccountTokenRequest.self, from: Data(body))
        else { return WireAnswer((400, [:])) }
        guard UUID(uuidString: request.appAccountToken) != nil else {
            return WireAnswer(AppleAPIError(400, 4_000_183, "Invalid request. The app account token field must be a valid UUID.").answer)
        }
        guard let transaction = transactions[id], transaction.environment == environment else {
            return WireAnswer(AppleAPIError(404, 4_040_005, "Original transaction id not found.").answer)
        }
        guard transaction.originalTransactionID == id else {
            return WireAnswer(
                AppleAPIError(400, 4_000_187, "Invalid request. The transaction ID provided is not an original transaction ID.").answer)
        }
        let token = request.appAccountToken.lowercased()
        setAccountTokens[id] = token
        for (other, var purchase) in transactions where purchase.originalTransactionID == id {
            purchase.appAccountToken = token
            transactions[other] = purchase
        }
        return WireAnswer((200, [:]))
    }
}

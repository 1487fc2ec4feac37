import Foundation

/// The calls that tell Apple what Stockroom did with a transaction: Finish Transaction, Send
/// Consumption Information and Set App Account Token. One attempt each, in the transaction's own environment (the
/// ledger knows it, so there is no sandbox fallback); the durable queue that calls them
/// retries across restarts.
extension AppStoreServerAPIClient {
    /// `POST /inApps/v1/transactions/{transactionId}/finish`: Apple learns that the server
    /// delivered the content (App Store Server API 1.20).
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/finish-transaction
    public func finishTransaction(_ transactionID: String, environment: StoreEnvironment) async -> ServerAPICallOutcome {
        guard Self.isTransactionID(transactionID) else { return Self.notATransactionID }
        let exchange = await exchange(
            .post, path: "/inApps/v1/transactions/\(transactionID)/finish", environment: environment,
            timeout: min(Self.callTimeout, policy.totalBudget), endpoint: "finish")
        return Self.outcome(of: exchange)
    }

    /// `PUT /inApps/v2/transactions/consumption/{transactionId}` with `information` as Apple's
    /// `ConsumptionRequest`; success is 202. Without the customer's consent no call is made
    /// (Apple would refuse it with 4000035, and the data must not leave without consent).
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/send-consumption-information
    public func sendConsumptionInformation(
        _ transactionID: String, environment: StoreEnvironment, _ information: ConsumptionInformation
    ) async -> ServerAPICallOutcome {
        guard Self.isTransactionID(transactionID) else { return Self.notATransactionID }
        guard information.customerConsented else {
            return .refused(status: 400, errorCode: 4_000_035, reason: "the customer did not consent; no call made")
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        guard let body = try? encoder.encode(information) else {
            return .refused(status: 400, errorCode: nil, reason: "the consumption information could not be encoded; no call made")
        }
        let exchange = await exchange(
            .put, path: "/inApps/v2/transactions/consumption/\(transactionID)", environment: environment, body: Array(body),
            timeout: min(Self.callTimeout, policy.totalBudget), endpoint: "consumption")
        return Self.outcome(of: exchange)
    }

    /// `PUT /inApps/v1/transactions/{originalTransactionId}/appAccountToken` with `request`:
    /// Apple binds the purchase to the app's account, and later transactions and notifications
    /// of it carry the token (App Store Server API 1.16). Success is 200; Apple refuses a token
    /// that is no UUID (4000183), a transaction ID that is not an original one (4000187) and a
    /// Family Sharing transaction (4000185) with 400, and an unknown purchase with 404 (4040005).
    ///
    /// See https://developer.apple.com/documentation/appstoreserverapi/set-app-account-token
    public func setAppAccountToken(
        _ originalTransactionID: String, environment: StoreEnvironment, _ request: UpdateAppAccountTokenRequest
    ) async -> ServerAPICallOutcome {
        guard Self.isTransactionID(originalTransactionID) else { return Self.notATransactionID }
        guard UUID(uuidString: request.appAccountToken) != nil, let body = request.json else {
            return .refused(status: 400, errorCode: 4_000_183, reason: "the app account token is not a UUID; no call made")
        }
        let exchange = await exchange(
            .put, path: "/inApps/v1/transactions/\(originalTransactionID)/appAccountToken", environment: environment,
            body: Array(body.utf8), timeout: min(Self.callTimeout, policy.totalBudget), endpoint: "appAccountToken")
        return Self.outcome(of: exchange)
    }

    /// What the queue makes of a text that is no transaction ID: nothing to retry, no URL built.
    static let notATransactionID = ServerAPICallOutcome.refused(status: 400, errorCode: nil, reason: "not a transaction ID; no call made")

    static func outcome(of exchange: ServerAPIExchange) -> ServerAPICallOutcome {
        switch exchange {
        case .answered: .accepted
        case .notFound: .notFound
        case .transient(let reason, let after): .retryLater(reason: reason, after: after)
        case .credentialsRefused(let reason): .retryLater(reason: reason, after: nil)
        case .refused(let status, let errorCode, let reason): .refused(status: status, errorCode: errorCode, reason: reason)
        }
    }
}

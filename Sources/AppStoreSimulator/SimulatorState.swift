import Foundation
import StockroomCore

/// Everything the simulator remembers, in memory: what it sold, to which device, the queued
/// faults and the call counts.
actor SimulatorState {
    let configuration: SimulatorConfiguration
    /// Signs StoreKit 2 transactions; its root is what a server pointed here trusts.
    let signingChain: SigningChain
    /// The App Store Server API key the simulator accepts tokens from.
    let apiKey: ServerAPIKey
    /// What it sold, by transaction ID; the `+Lifecycle` and `+Notifications` extensions change it.
    var transactions: [String: SimulatedTransaction] = [:]
    /// Transaction IDs per device, in purchase order.
    var devices: [String: [String]] = [:]
    /// Tokens set by Set App Account Token, by original transaction ID: later transactions of the purchase carry them.
    var setAccountTokens: [String: String] = [:]
    private var nextTransactionNumber: Int64 = 2_000_000_000_000_001
    private var faults: [(fault: Fault, remaining: Int)] = []
    private(set) var stats = SimulatorStats()
    /// Receipts this simulator issued, by the SHA-256 of their base64 text: recognised without
    /// a CMS check (it signed them itself). Anything else, altered receipts included, is verified
    /// cryptographically. Keeps the simulator's CPU out of Stockroom's benchmarks.
    private var issuedReceipts: [String: AppReceipt] = [:]
    /// Where notifications are posted (`PUT /sim/notification-url`); nil keeps them unsent.
    private(set) var notificationURL: String?
    /// Every notification minted, oldest first, for Get Notification History.
    var notifications: [SimulatedNotification] = []
    /// The index in `notifications` of each UUID still kept.
    var notificationPositions: [String: Int] = [:]
    /// Notifications dropped from the front once more than `SimulatorState.notificationsKept` were minted.
    var droppedNotifications = 0

    init(configuration: SimulatorConfiguration, signingChain: SigningChain, apiKey: ServerAPIKey) {
        self.configuration = configuration
        self.signingChain = signingChain
        self.apiKey = apiKey
        self.notificationURL = configuration.notificationURL
    }

    func setNotificationURL(_ url: String?) throws(SimulatorError) {
        if let url, !(url.hasPrefix("http://") || url.hasPrefix("https://")) { throw .badRequest("url must be an http(s) URL") }
        notificationURL = url
    }

    func hasTransaction(_ id: String) -> Bool { transactions[id] != nil }

    /// The App Store Server API's answer for `GET /inApps/v1/transactions/{id}` at `environment`.
    func serverAPITransaction(_ id: String, authorization: String?, environment: StoreEnvironment) -> (status: Int, body: [UInt8]) {
        let (status, object) = serverAPIAnswer(id, authorization: authorization, environment: environment)
        return (status, Array((try? JSONSerialization.data(withJSONObject: object, options: [.withoutEscapingSlashes])) ?? Data()))
    }

    private func serverAPIAnswer(_ id: String, authorization: String?, environment: StoreEnvironment) -> (Int, [String: Any]) {
        guard let transaction = transactions[id], transaction.environment == environment else {
            // Apple answers 401 before it looks the transaction up; the bundle is unknown here, so check against the default.
            if let problem = Self.tokenProblem(
                authorization, apiKey: apiKey, bundleID: transactions[id]?.bundleID ?? configuration.bundleID)
            {
                return (401, ["errorCode": 4010000, "errorMessage": problem])
            }
            return (404, ["errorCode": 4040010, "errorMessage": "Transaction id not found."])
        }
        if let problem = Self.tokenProblem(authorization, apiKey: apiKey, bundleID: transaction.bundleID) {
            return (401, ["errorCode": 4010000, "errorMessage": problem])
        }
        do {
            return (200, ["signedTransactionInfo": try signedTransaction(transaction, at: AppleDate.nowMilliseconds())])
        } catch {
            return (500, ["errorCode": 5000000, "errorMessage": "\(error)"])
        }
    }

    static func tokenProblem(_ authorization: String?, apiKey: ServerAPIKey, bundleID: String) -> String? {
        guard let authorization, authorization.lowercased().hasPrefix("bearer ") else { return "a bearer token is required" }
        return apiKey.problem(with: String(authorization.dropFirst(7)), bundleID: bundleID)
    }

    // MARK: Control API

    /// Sells `request.productId`; with `originalTransactionId`, a restore of that purchase.
    /// Without `deviceId`, a restore lands on the original's device and a purchase on a new one.
    func purchase(_ request: PurchaseRequest) throws(SimulatorError) -> PurchaseResult {
        guard ProductID.isValid(request.productId) else { throw .badRequest("productId is not a valid product ID") }
        let style = request.receiptStyle ?? "app"
        guard style == "app" || style == "transaction" else { throw .badRequest("receiptStyle must be app or transaction") }
        let now = AppleDate.nowMilliseconds()
        var original: SimulatedTransaction?
        if let originalID = request.originalTransactionId {
            guard let found = transactions[originalID] else { throw .unknownTransaction(originalID) }
            original = found
        }
        // A restore keeps the original's kind and expiry unless the request says otherwise.
        let type =
            request.type
            ?? (request.expiresInSeconds != nil ? SimulatedTransaction.autoRenewable : original?.type ?? SimulatedTransaction.nonConsumable)
        guard SimulatedTransaction.types.contains(type) else {
            throw .badRequest("type must be one of \(SimulatedTransaction.types.sorted())")
        }
        let isSubscription = type == SimulatedTransaction.autoRenewable || type == SimulatedTransaction.nonRenewing
        var expires = isSubscription ? original?.expiresDateMilliseconds : nil
        if let seconds = request.expiresInSeconds {
            guard isSubscription else {
                throw .badRequest("expiresInSeconds is for Auto-Renewable or Non-Renewing Subscription products")
            }
            guard (-Self.expiryBound...Self.expiryBound).contains(seconds) else {
                throw .badRequest("expiresInSeconds must be within ten years")
            }
            expires = now + Int64(seconds) * 1000
        }
        let id = String(nextTransactionNumber)
        nextTransactionNumber += 1
        let transaction = SimulatedTransaction(
            transactionID: id,
            originalTransactionID: original?.originalTransactionID ?? id,
            productID: original?.productID ?? request.productId,
            bundleID: request.bundleId ?? original?.bundleID ?? configuration.bundleID,
            environment: request.environment ?? original?.environment ?? .production,
            deviceID: request.deviceId ?? original?.deviceID ?? UUID().uuidString,
            purchaseDateMilliseconds: now,
            originalPurchaseDateMilliseconds: original?.originalPurchaseDateMilliseconds ?? now,
            appAccountToken: request.appAccountToken?.lowercased() ?? original.flatMap { setAccountTokens[$0.originalTransactionID] },
            type: type, expiresDateMilliseconds: expires)
        transactions[id] = transaction
        devices[transaction.deviceID, default: []].append(id)
        let receipt = try receipt(for: transaction, at: now)
        return PurchaseResult(
            transactionId: id, originalTransactionId: transaction.originalTransactionID, productId: transaction.productID,
            bundleId: transaction.bundleID, environment: transaction.environment, deviceId: transaction.deviceID,
            receiptData: receipt, signedTransaction: try signedTransaction(transaction, at: now),
            type: type, expiresDate: expires, transactionReceipt: style == "transaction" ? try transactionReceipt(for: transaction) : nil)
    }

    /// What `POST /sim/transactions/{id}/refund` answers: the verifyReceipt view and the new JWS.
    struct RefundResult: Encodable {
        var transaction: VerifyReceiptBody.InApp
        var signedTransaction: String
    }

    /// Cancels a transaction as a refund does; refunding twice keeps the first date.
    func refund(_ id: String) throws(SimulatorError) -> RefundResult {
        guard var transaction = transactions[id] else { throw .unknownTransaction(id) }
        if transaction.cancellationDateMilliseconds == nil {
            transaction.cancellationDateMilliseconds = AppleDate.nowMilliseconds()
            transaction.cancellationReason = "0"
            transaction.revocationType = "REFUND_FULL"
            transactions[id] = transaction
        }
        return RefundResult(
            transaction: VerifyReceiptBody.InApp(transaction),
            signedTransaction: try signedTransaction(transaction, at: AppleDate.nowMilliseconds()))
    }

    func enqueue(_ fault: Fault) throws(SimulatorError) -> Int {
        if let problem = fault.problem { throw .badRequest(problem) }
        faults.append((fault, fault.count ?? 1))
        return faults.reduce(0) { $0 + $1.remaining }
    }

    func clearFaults() { faults.removeAll() }

    func resetStats() { stats = SimulatorStats() }

    // MARK: Upstream endpoints

    /// Counts the call and hands out the next queued fault meant for `endpoint` (or for any), if any.
    func begin(_ endpoint: String, environment: StoreEnvironment) -> Fault? {
        stats.record(endpoint, environment: environment)
        guard let index = faults.firstIndex(where: { $0.fault.endpoint == nil || $0.fault.endpoint == endpoint }) else { return nil }
        let fault = faults[index].fault
        faults[index].remaining -= 1
        if faults[index].remaining == 0 { faults.remove(at: index) }
        return fault
    }

    /// verifyReceipt's verdict on `receiptData` at the `endpoint` environment.
    func verify(receiptData: String?, password: String?, endpoint: StoreEnvironment) -> VerifyReceiptBody {
        guard let receiptData, !receiptData.isEmpty else { return VerifyReceiptBody(status: 21002) }
        let receipt: AppReceipt
        if let issued = issuedReceipts[Self.digest(receiptData)] {
            receipt = issued
        } else {
            switch ReceiptInspection.inspect(base64: receiptData, root: signingChain.root) {
            case .success(let read) where read.isSignatureVerified: receipt = read.receipt
            case .success: return VerifyReceiptBody(status: 21003)
            case .failure:
                guard let transactionReceipt = TransactionReceipt.parse(base64: receiptData) else {
                    return VerifyReceiptBody(status: 21002)
                }
                return verifyTransactionReceipt(transactionReceipt, password: password, endpoint: endpoint)
            }
        }
        let environment: StoreEnvironment = receipt.receiptType == "Production" ? .production : .sandbox
        let deviceID = String(decoding: receipt.opaqueValue, as: UTF8.self)
        if let secret = configuration.sharedSecret, password != secret { return VerifyReceiptBody(status: 21004) }
        switch (environment, endpoint) {
        case (.sandbox, .production): return VerifyReceiptBody(status: 21007)
        case (.production, .sandbox): return VerifyReceiptBody(status: 21008)
        default: break
        }
        let now = AppleDate.nowMilliseconds()
        let created = Int64(receipt.creationDate.timeIntervalSince1970 * 1000)
        let inApp = receipt.purchases.compactMap { transactions[$0.transactionID] }.map(VerifyReceiptBody.InApp.init)
        let latest = (devices[deviceID] ?? []).compactMap { transactions[$0] }
            .filter { $0.bundleID == receipt.bundleID && $0.environment == environment }
        return VerifyReceiptBody(
            status: 0,
            environment: environment.rawValue,
            receipt: .init(
                receiptType: environment == .production ? "Production" : "ProductionSandbox",
                bundleId: receipt.bundleID,
                receiptCreationDate: AppleDate.string(milliseconds: created),
                receiptCreationDateMs: String(created),
                requestDate: AppleDate.string(milliseconds: now), requestDateMs: String(now),
                inApp: inApp),
            latestReceiptInfo: latest.map(VerifyReceiptBody.InApp.init),
            latestReceipt: receiptData)
    }

    /// The StoreKit 2 JWS of `transaction`, as Apple's `JWSTransactionDecodedPayload`: the
    /// purchase's `appAccountToken` is in every copy (notifications, the Server API, history), as Apple signs it.
    func signedTransaction(_ transaction: SimulatedTransaction, at now: Int64) throws(SimulatorError) -> String {
        var payload: [String: Any] = [
            "transactionId": transaction.transactionID, "originalTransactionId": transaction.originalTransactionID,
            "productId": transaction.productID, "bundleId": transaction.bundleID, "purchaseDate": transaction.purchaseDateMilliseconds,
            "originalPurchaseDate": transaction.originalPurchaseDateMilliseconds, "quantity": 1, "type": transaction.type,
            "inAppOwnershipType": "PURCHASED", "environment": transaction.environment.rawValue, "signedDate": now,
        ]
        if let cancelled = transaction.cancellationDateMilliseconds {
            payload["revocationDate"] = cancelled
            payload["revocationReason"] = Int(transaction.cancellationReason ?? "0") ?? 0
            if let type = transaction.revocationType { payload["revocationType"] = type }
            if let percentage = transaction.revocationPercentage { payload["revocationPercentage"] = percentage }
        }
        if let appAccountToken = transaction.appAccountToken { payload["appAccountToken"] = appAccountToken }
        if let expires = transaction.expiresDateMilliseconds { payload["expiresDate"] = expires }
        payload["appTransactionId"] = Self.appTransactionID(of: transaction)
        do {
            return try signingChain.sign(payload: Array(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])))
        } catch {
            throw .internal("signing failed: \(error)")
        }
    }

    /// The app download a purchase was made in (Apple's `appTransactionId`): one per device, app
    /// and environment here, as Apple has one per Apple Account and app. Derived, never stored.
    static func appTransactionID(of transaction: SimulatedTransaction) -> String {
        let hash = SHA256.hash(Array("\(transaction.deviceID)|\(transaction.bundleID)|\(transaction.environment.rawValue)".utf8))
        let number = hash.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) } % 1_000_000_000_000_000
        return String(7_000_000_000_000_000 + number)
    }

    /// The JWS of the app download `transaction` was made in, as Apple's
    /// `JWSAppTransactionDecodedPayload`: what RESCIND_CONSENT's `appData` carries.
    func signedAppTransaction(of transaction: SimulatedTransaction, at now: Int64) throws(SimulatorError) -> String {
        let payload: [String: Any] = [
            "appTransactionId": Self.appTransactionID(of: transaction), "bundleId": transaction.bundleID,
            "receiptType": transaction.environment.rawValue, "applicationVersion": "1", "originalApplicationVersion": "1",
            "originalPurchaseDate": transaction.originalPurchaseDateMilliseconds, "originalPlatform": "iOS", "receiptCreationDate": now,
            "signedDate": now,
        ]
        do {
            return try signingChain.sign(payload: Array(try JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys])))
        } catch {
            throw .internal("signing failed: \(error)")
        }
    }

    private static func digest(_ receiptData: String) -> String {
        ByteEncoding.hex(SHA256.hash(Array(receiptData.utf8)))
    }

    /// The device's receipt after `transaction`: every purchase of that device, app and
    /// environment, as a PKCS#7 receipt in Apple's ASN.1 layout.
    private func receipt(for transaction: SimulatedTransaction, at now: Int64) throws(SimulatorError) -> String {
        let purchases = (devices[transaction.deviceID] ?? []).compactMap { transactions[$0] }
            .filter { $0.bundleID == transaction.bundleID && $0.environment == transaction.environment }
            .map { other in
                AppReceipt.Purchase(
                    quantity: 1, productID: other.productID, transactionID: other.transactionID,
                    purchaseDate: Date(timeIntervalSince1970: Double(other.purchaseDateMilliseconds) / 1000),
                    originalTransactionID: other.originalTransactionID,
                    cancellationDate: other.cancellationDateMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) },
                    expiresDate: other.expiresDateMilliseconds.map { Date(timeIntervalSince1970: Double($0) / 1000) })
            }
        let receipt = AppReceipt(
            receiptType: transaction.environment == .production ? "Production" : "ProductionSandbox",
            bundleID: transaction.bundleID, appVersion: "1", opaqueValue: Array(transaction.deviceID.utf8),
            creationDate: Date(timeIntervalSince1970: Double(now / 1000)), purchases: purchases)
        do {
            let receiptData = ByteEncoding.base64(try signingChain.signReceipt(payload: receipt.encodedPayload()))
            issuedReceipts[Self.digest(receiptData)] = receipt
            return receiptData
        } catch {
            throw .internal("receipt signing failed: \(error)")
        }
    }
}

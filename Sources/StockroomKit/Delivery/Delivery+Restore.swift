import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// One purchase of a restore, and how its delivery went.
public struct RestoredPurchase: Sendable, Equatable {
    public var productID: String
    public var transactionID: String
    public var outcome: DeliveryOutcome
    /// False when an intact copy was already on disk and nothing was downloaded.
    public var downloaded: Bool
}

extension Delivery {
    /// The restore of the original API (restored transactions) and of StoreKit 2
    /// (`Transaction.currentEntitlements`): each purchase whose file is not on disk intact is
    /// delivered again; one that is, and was acknowledged, is answered without a request; one that
    /// is but never was acknowledged is acknowledged first.
    public func deliverMissing(_ purchases: [Purchase]) async -> [RestoredPurchase] {
        await withTaskGroup(of: RestoredPurchase.self) { group in
            for purchase in purchases {
                group.addTask {
                    if let refusal = await self.refusal(productID: purchase.productID, transactionID: purchase.transactionID) {
                        return RestoredPurchase(
                            productID: purchase.productID, transactionID: purchase.transactionID, outcome: refusal, downloaded: false)
                    }
                    let attempt = await self.delivering(purchase.transactionID) { delivery in await delivery.start(purchase) }
                    return RestoredPurchase(
                        productID: purchase.productID, transactionID: purchase.transactionID, outcome: attempt.outcome,
                        downloaded: attempt.downloaded)
                }
            }
            var all: [RestoredPurchase] = []
            for await purchase in group { all.append(purchase) }
            return all.sorted { $0.productID < $1.productID }
        }
    }

    /// Every purchase of the customer who made `signedTransaction`, through `POST /v1/restores`:
    /// each delivered as `deliver` does, except those whose file is already on disk, intact
    /// (checked against the catalogue's SHA-256) and acknowledged. A refusal of the restore
    /// itself is the outcome.
    ///
    /// The answer is a stranger's: a product it lists is delivered only when its name is a
    /// product ID, its transaction ID is one, its `location` is a path on the server and it is in
    /// the catalogue (the app's, or else the server's); the others are refused one by one.
    public func restore(signedTransaction: String) async -> Result<[RestoredPurchase], RestoreFailure> {
        let restored: [RestoresAnswer.Product]
        switch await postRestore(signedTransaction) {
        case .success(let products): restored = products
        case .failure(let failure): return .failure(failure)
        }
        var catalog = configuration.catalog
        if catalog == nil { catalog = await serverCatalogue() }
        return .success(
            await withTaskGroup(of: RestoredPurchase.self) { group in
                for product in Self.onePerProduct(restored) {
                    let listed = catalog?.products.first { $0.productID == product.productId }
                    if catalog != nil, listed == nil {
                        group.addTask {
                            RestoredPurchase(
                                productID: product.productId, transactionID: product.transactionId,
                                outcome: .refused(
                                    OutcomeReason(
                                        code: "not_in_catalogue", message: "The restore lists a product that is not in the catalogue.")),
                                downloaded: false)
                        }
                        continue
                    }
                    group.addTask { await self.restoreOne(product, signedTransaction: signedTransaction, sha256: listed?.sha256) }
                }
                var all: [RestoredPurchase] = []
                for await purchase in group { all.append(purchase) }
                return all.sorted { $0.productID < $1.productID }
            })
    }

    /// The most products one restore acts on without the app's catalogue to bound them.
    static let maximumRestoredProducts = 1_000

    /// The restore's products as the server promises them, one entry per product: a product
    /// listed again, a transaction listed for a second product, and anything past
    /// `maximumRestoredProducts` are dropped, so a restore never acts on more than that.
    static func onePerProduct(_ products: [RestoresAnswer.Product]) -> [RestoresAnswer.Product] {
        var products = products
        var seenProducts = Set<String>()
        var seenTransactions = Set<String>()
        products.removeAll { product in
            !seenProducts.insert(product.productId).inserted || !seenTransactions.insert(product.transactionId).inserted
        }
        return Array(products.prefix(maximumRestoredProducts))
    }

    private func restoreOne(_ product: RestoresAnswer.Product, signedTransaction: String, sha256: String?) async -> RestoredPurchase {
        func restored(_ outcome: DeliveryOutcome, downloaded: Bool) -> RestoredPurchase {
            RestoredPurchase(productID: product.productId, transactionID: product.transactionId, outcome: outcome, downloaded: downloaded)
        }
        if let refusal = refusal(productID: product.productId, transactionID: product.transactionId) {
            return restored(refusal, downloaded: false)
        }
        guard BodyRules.isPlainText(product.token, allowingSpaces: false), origin.url(product.location) != nil else {
            let refusal = AnswerRefusal.foreignLocation
            emit(.answerRefused(transactionID: product.transactionId, reason: refusal.description))
            return restored(
                .refused(OutcomeReason(code: "bad_answer", message: "The restore's answer was refused: \(refusal).")), downloaded: false)
        }
        let attempt = await delivering(product.transactionId) { delivery in
            var entry: JournalEntry
            do {
                entry =
                    try delivery.recorded(product.transactionId, of: product.productId)
                    ?? JournalEntry(
                        transactionID: product.transactionId, originalTransactionID: nil, productID: product.productId,
                        renewal: .restore(signedTransaction: signedTransaction), appAccountToken: nil, consent: nil,
                        destination: delivery.destination(product.productId, product.transactionId))
            } catch {
                return Attempt(outcome: delivery.storageFailure(error), downloaded: false)
            }
            entry.destination = delivery.destination(product.productId, product.transactionId)
            let onDisk = delivery.adoptIntactFile(&entry, sha256: sha256)
            entry.token = product.token
            entry.location = product.location
            return Attempt(outcome: await delivery.drive(&entry), downloaded: !onDisk)
        }
        return restored(attempt.outcome, downloaded: attempt.downloaded)
    }

    /// Whether the entry's file is on disk and whole: the journal placed it (checked then), or
    /// its SHA-256 is the catalogue's. A file found whole by its digest is recorded as placed, so
    /// it is acknowledged before it is ever reported safe to finish.
    func adoptIntactFile(_ entry: inout JournalEntry, sha256: String?) -> Bool {
        guard let size = LocalFile.regularFileSize(entry.destination) else { return false }
        if entry.stage >= .placed, entry.expectedSize == size { return true }
        guard let sha256, let hashed = try? SHA256Digest.ofFile(entry.destination), hashed.bytes == size else { return false }
        let digest = hashed.digest.finalize()
        guard digest.map({ String(format: "%02x", $0) }).joined() == sha256.lowercased() else { return false }
        entry.stage = .placed
        entry.expectedSize = size
        entry.digest = Data(digest).base64EncodedString()
        return true
    }

    /// A new token for a restored purchase: `POST /v1/restores` again.
    func regrantByRestore(_ entry: inout JournalEntry, signedTransaction: String) async -> Step {
        switch await postRestore(signedTransaction) {
        case .failure(.transport):
            return .interrupted(progressed: false)
        case .failure(.refused(let outcome)):
            return .settled(outcome)
        case .success(let products):
            guard
                let product = products.first(where: { $0.transactionId == entry.transactionID })
                    ?? products.first(where: { $0.productId == entry.productID })
            else {
                return .settled(.refused(OutcomeReason(code: "not_restorable", message: "The restore no longer lists \(entry.productID).")))
            }
            guard BodyRules.isPlainText(product.token, allowingSpaces: false), origin.url(product.location) != nil else {
                return .settled(refused(.foreignLocation, entry))
            }
            entry.token = product.token
            entry.location = product.location
            do { try save(entry) } catch { return .settled(storageFailure(error)) }
            return .again
        }
    }

    private func postRestore(_ signedTransaction: String) async -> Result<[RestoresAnswer.Product], RestoreFailure> {
        var request = URLRequest(url: endpoint("/v1/restores"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try? JSONEncoder().encode(["signedTransaction": signedTransaction])
        let result = await transport.collect(request, limit: 4 << 20)
        guard let response = result.response else { return .failure(.transport(result.error.map(Self.describe) ?? "no answer")) }
        guard response.statusCode == 200 else {
            let error = ServerAnswer.error(in: result.body)
            return .failure(
                .refused(
                    ServerAnswer.outcome(
                        status: response.statusCode, code: error?.code, message: error?.message,
                        retryAfter: ServerAnswer.retryAfter(response.value(forHTTPHeaderField: "Retry-After"), now: configuration.now()),
                        failures: 0, proofIsReceipt: false, receiptRefreshed: true)))
        }
        guard let answer = ServerJSON.decode(RestoresAnswer.self, from: result.body) else {
            return .failure(
                .refused(
                    .retryLater(
                        after: .seconds(30),
                        OutcomeReason(code: "bad_answer", message: "The restore's answer is not readable.", status: 200))))
        }
        return .success(answer.products)
    }

    /// The server's `/v1/catalog`, when the app gave no catalogue: it bounds what a restore may
    /// deliver, and its SHA-256s tell an intact file on disk; nil offline.
    private func serverCatalogue() async -> Catalog? {
        let result = await transport.collect(URLRequest(url: endpoint("/v1/catalog")), limit: 16 << 20)
        guard result.response?.statusCode == 200 else { return nil }
        return ServerJSON.decode(Catalog.self, from: result.body)
    }
}

/// Why a restore as a whole did not happen.
public enum RestoreFailure: Error, Sendable, Equatable {
    /// No answer from the server.
    case transport(String)
    /// The server refused or could not serve it now: the outcome says what to do.
    case refused(DeliveryOutcome)
}

/// The answer of `POST /v1/restores`.
struct RestoresAnswer: Decodable {
    struct Product: Decodable, Sendable {
        var productId: String
        var transactionId: String
        var token: String
        var location: String
    }
    var products: [Product]
}

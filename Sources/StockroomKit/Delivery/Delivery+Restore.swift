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
    /// delivered again; the others are answered from disk without a request.
    public func deliverMissing(_ purchases: [Purchase]) async -> [RestoredPurchase] {
        await withTaskGroup(of: RestoredPurchase.self) { group in
            for purchase in purchases {
                group.addTask {
                    let destination = self.configuration.destination(purchase.productID, purchase.transactionID)
                    if await self.isIntact(productID: purchase.productID, transactionID: purchase.transactionID, sha256: nil) {
                        return RestoredPurchase(productID: purchase.productID, transactionID: purchase.transactionID, outcome: .delivered(file: destination), downloaded: false)
                    }
                    let outcome = await self.deliver(purchase)
                    return RestoredPurchase(productID: purchase.productID, transactionID: purchase.transactionID, outcome: outcome, downloaded: true)
                }
            }
            var all: [RestoredPurchase] = []
            for await purchase in group { all.append(purchase) }
            return all.sorted { $0.productID < $1.productID }
        }
    }

    /// Every purchase of the customer who made `signedTransaction`, through `POST /v1/restores`:
    /// each delivered as `deliver` does, except those whose file is already on disk, intact
    /// (checked against the catalogue's SHA-256). A refusal of the restore itself is the outcome.
    public func restore(signedTransaction: String) async -> Result<[RestoredPurchase], RestoreFailure> {
        let restored: [RestoresAnswer.Product]
        switch await postRestore(signedTransaction) {
        case .success(let products): restored = products
        case .failure(let failure): return .failure(failure)
        }
        let digests = await catalogueDigests()
        return .success(await withTaskGroup(of: RestoredPurchase.self) { group in
            for product in restored {
                group.addTask { await self.restoreOne(product, signedTransaction: signedTransaction, sha256: digests[product.productId]) }
            }
            var all: [RestoredPurchase] = []
            for await purchase in group { all.append(purchase) }
            return all.sorted { $0.productID < $1.productID }
        })
    }

    private func restoreOne(_ product: RestoresAnswer.Product, signedTransaction: String, sha256: String?) async -> RestoredPurchase {
        let destination = configuration.destination(product.productId, product.transactionId)
        if isIntact(productID: product.productId, transactionID: product.transactionId, sha256: sha256) {
            return RestoredPurchase(productID: product.productId, transactionID: product.transactionId, outcome: .delivered(file: destination), downloaded: false)
        }
        let outcome = await delivering(product.transactionId) { delivery in
            var entry: JournalEntry
            do {
                entry = try delivery.journal.entry(product.transactionId) ?? JournalEntry(
                    transactionID: product.transactionId, originalTransactionID: nil, productID: product.productId,
                    renewal: .restore(signedTransaction: signedTransaction), appAccountToken: nil, consent: nil, destination: destination.path)
            } catch {
                return delivery.storageFailure(error)
            }
            entry.token = product.token
            entry.location = product.location
            return await delivery.drive(&entry)
        }
        return RestoredPurchase(productID: product.productId, transactionID: product.transactionId, outcome: outcome, downloaded: true)
    }

    /// Whether the product's file is on disk and whole: the journal placed it (checked then), or
    /// its SHA-256 is the catalogue's.
    func isIntact(productID: String, transactionID: String, sha256: String?) -> Bool {
        let destination = configuration.destination(productID, transactionID)
        guard FileManager.default.fileExists(atPath: destination.path) else { return false }
        if let entry = try? journal.entry(transactionID), entry.stage >= .placed, entry.destination == destination.path,
            entry.expectedSize == Self.size(destination.path)
        {
            return true
        }
        guard let sha256, let hashed = try? SHA256Digest.ofFile(destination.path) else { return false }
        return hashed.digest.finalize().map { String(format: "%02x", $0) }.joined() == sha256.lowercased()
    }

    /// A new token for a restored purchase: `POST /v1/restores` again.
    func regrantByRestore(_ entry: inout JournalEntry, signedTransaction: String) async -> Step {
        switch await postRestore(signedTransaction) {
        case .failure(.transport):
            return .interrupted(progressed: false)
        case .failure(.refused(let outcome)):
            return .settled(outcome)
        case .success(let products):
            guard let product = products.first(where: { $0.transactionId == entry.transactionID }) ?? products.first(where: { $0.productId == entry.productID })
            else {
                return .settled(.refused(OutcomeReason(code: "not_restorable", message: "The restore no longer lists \(entry.productID).")))
            }
            entry.token = product.token
            entry.location = product.location
            do { try save(entry) } catch { return .settled(storageFailure(error)) }
            return .again
        }
    }

    private func postRestore(_ signedTransaction: String) async -> Result<[RestoresAnswer.Product], RestoreFailure> {
        var request = URLRequest(url: url("/v1/restores"))
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = try? JSONEncoder().encode(["signedTransaction": signedTransaction])
        let result = await transport.collect(request, limit: 4 << 20)
        guard let response = result.response else { return .failure(.transport(result.error.map { "\($0)" } ?? "no answer")) }
        guard response.statusCode == 200 else {
            let error = ServerAnswer.error(in: result.body)
            return .failure(.refused(ServerAnswer.outcome(
                status: response.statusCode, code: error?.code, message: error?.message,
                retryAfter: ServerAnswer.retryAfter(response.value(forHTTPHeaderField: "Retry-After"), now: configuration.now()),
                failures: 0, proofIsReceipt: false, receiptRefreshed: true)))
        }
        guard let answer = ServerJSON.decode(RestoresAnswer.self, from: result.body) else {
            return .failure(.refused(.retryLater(after: .seconds(30), OutcomeReason(code: "bad_answer", message: "The restore's answer is not readable.", status: 200))))
        }
        return .success(answer.products)
    }

    /// SHA-256 (hex) per product from `/v1/catalog`, to tell an intact file on disk; empty offline.
    private func catalogueDigests() async -> [String: String] {
        let result = await transport.collect(URLRequest(url: url("/v1/catalog")), limit: 16 << 20)
        guard result.response?.statusCode == 200, let catalog = ServerJSON.decode(Catalog.self, from: result.body) else { return [:] }
        return Dictionary(catalog.products.compactMap { product in product.sha256.map { (product.productID, $0) } }, uniquingKeysWith: { first, _ in first })
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

import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StockroomCore

/// The download routes: verify and stream (`POST /v1/downloads`), resume, status and ack.
///
/// The ledger is read on every request, so what an operator changes takes effect at once.
struct DownloadController<Context: RequestContext> {
    let catalog: CatalogStore
    let ledger: any Ledger
    let verifier: any ReceiptVerifier
    let signedTransactions: SignedTransactionVerifier
    /// When credentials exist, signed transactions are confirmed with the App Store Server API.
    let serverAPI: AppStoreServerAPIClient?
    let responder: ContentResponder<LocalContentStore>
    let tokens: DownloadTokenSigner
    let bundleID: String
    /// A record verified more recently than this serves a repeated POST without asking Apple.
    let reverifyInterval: Duration

    func addRoutes(to group: RouterGroup<Context>) {
        group.post("downloads", use: start)
        group.get("downloads/:transactionId/content", use: resume)
        group.get("downloads/:transactionId", use: status)
        group.post("downloads/:transactionId/ack", use: acknowledge)
    }

    // MARK: POST /v1/downloads

    @Sendable func start(_ request: Request, context: Context) async throws -> Response {
        let body = try await request.body.collect(upTo: context.maxUploadSize)
        let input = try DownloadRequest.parse(Array(buffer: body))
        guard let product = catalog.catalog.product(id: input.productID) else { throw DownloadError.unknownProduct(input.productID) }

        var known: Fulfilment?
        if let transactionID = input.transactionID, let row = try await ledger.fulfilment(transactionID) {
            try await ensureNotRevoked(row)
            guard row.productID == product.productId else {
                throw DownloadError.receiptRejected(.productMismatch(transactionID: transactionID, productID: product.productId))
            }
            if row.state.isEntitled, row.proof == input.proofText, let verifiedAt = row.verifiedAt,
                Date().timeIntervalSince(verifiedAt) < Double(reverifyInterval.components.seconds)
            {
                try await ledger.countAttempt(transactionID)
                return try await stream(row, product: product, head: nil, token: true, context: context)
            }
            known = row
        }

        let receiptData: String
        switch input.proof {
        case .signedTransaction(let jws):
            return try await startSigned(jws, input: input, product: product, context: context)
        case .receipt(let receipt):
            receiptData = receipt
        }
        let verdict = await verifier.verify(
            VerificationRequest(receiptData: receiptData, productID: product.productId, transactionID: input.transactionID),
            freshness: .cachedAllowed)
        switch verdict {
        case .valid(let receipt):
            guard let transaction = receipt.transaction else { throw DownloadError.receiptRejected(.productNotInReceipt(product.productId)) }
            if try await ledger.isRevoked(originalTransactionID: transaction.originalTransactionID) {
                throw DownloadError.revoked(transaction.transactionID)
            }
            let row = try await ledger.recordVerified(
                VerifiedRecord(
                    transactionID: transaction.transactionID, originalTransactionID: transaction.originalTransactionID,
                    productID: product.productId, bundleID: bundleID, environment: receipt.environment,
                    proofKind: .receipt, proof: receiptData),
                countAttempt: true)
            return try await stream(row, product: product, head: nil, token: true, context: context)

        case .invalid(.revoked(let transaction)):
            // Apple's own word on a real receipt: revoke whatever we hold of that purchase.
            _ = try await ledger.revokePurchase(originalTransactionID: transaction.originalTransactionID, reason: "refunded (verifyReceipt)")
            throw DownloadError.revoked(transaction.transactionID)

        case .invalid(let reason):
            // Only the very receipt on record may reject a pending transaction.
            if let row = known, row.state == .pending, row.proof == receiptData {
                _ = try await ledger.transition(row.transactionID, to: .rejected, error: reason.description)
            }
            throw DownloadError.receiptRejected(reason)

        case .unavailable(let reason, let retryAfter):
            if let row = known, row.state.isEntitled {
                // Verified before: serve it rather than fail the customer while Apple is down.
                context.logger.warning("serving a previously verified transaction while upstream is unavailable", metadata: ["transaction": .string(row.transactionID)])
                try await ledger.countAttempt(row.transactionID)
                return try await stream(row, product: product, head: nil, token: true, context: context)
            }
            // Read locally (untrusted) when the app named no transaction, so the kept receipt has its ID.
            if let transactionID = input.transactionID ?? AppReceipt.readUntrusted(base64: receiptData)?.latestPurchase(of: product.productId)?.transactionID,
                TransactionID.isValid(transactionID)
            {
                _ = try await ledger.recordPending(
                    VerifiedRecord(
                        transactionID: transactionID, originalTransactionID: transactionID, productID: product.productId,
                        bundleID: bundleID, environment: nil, proofKind: .receipt, proof: receiptData),
                    error: reason)
            }
            throw DownloadError.upstreamUnavailable(retryAfter: retryAfter)
        }
    }

    /// A StoreKit 2 transaction: verified locally against the trusted root, no upstream call.
    private func startSigned(_ jws: String, input: DownloadRequest, product: Product, context: Context) async throws -> Response {
        var transaction: SignedTransaction
        switch signedTransactions.verify(jws) {
        case .success(let verified): transaction = verified
        case .failure(let failure): throw DownloadError.signedTransactionRejected(failure)
        }
        if let serverAPI {
            // Apple's current view: a refund since the app's copy was signed shows up here.
            switch await serverAPI.transaction(transaction.transactionId) {
            case .found(let info, _):
                if case .success(let current) = signedTransactions.verify(info) { transaction.revocationDate = current.revocationDate }
            case .notFound:
                throw DownloadError.receiptRejected(.transactionNotInReceipt(transaction.transactionId))
            case .unavailable(let reason, _):
                context.logger.warning("the App Store Server API is unavailable; the locally verified transaction stands", metadata: ["reason": .string(reason)])
            }
        }
        guard transaction.productId == product.productId else {
            throw DownloadError.receiptRejected(.productMismatch(transactionID: transaction.transactionId, productID: product.productId))
        }
        if let claimed = input.transactionID, claimed != transaction.transactionId {
            throw DownloadError.receiptRejected(.transactionNotInReceipt(claimed))
        }
        if let bound = transaction.appAccountToken, let account = input.appAccountToken, bound.lowercased() != account.lowercased() {
            throw DownloadError.transactionClaimed(transaction.transactionId)
        }
        let record = VerifiedRecord(
            transactionID: transaction.transactionId, originalTransactionID: transaction.originalTransactionId,
            productID: product.productId, bundleID: bundleID, environment: StoreEnvironment(rawValue: transaction.environment),
            proofKind: .signedTransaction, proof: jws)
        if transaction.isRevoked {
            try await ledger.recordRevoked(record, reason: "refunded or revoked (signed transaction)")
            throw DownloadError.revoked(transaction.transactionId)
        }
        if try await ledger.isRevoked(originalTransactionID: transaction.originalTransactionId) {
            throw DownloadError.revoked(transaction.transactionId)
        }
        let row = try await ledger.recordVerified(record, countAttempt: true)
        return try await stream(row, product: product, head: nil, token: true, context: context)
    }

    // MARK: GET /v1/downloads/{transactionId}/content

    @Sendable func resume(_ request: Request, context: Context) async throws -> Response {
        let (transactionID, tokenProduct, expired) = try authorize(request, context: context)
        guard !expired else { throw DownloadError.tokenExpired }
        let row = try await entitledRow(transactionID, tokenProduct: tokenProduct)
        guard let product = catalog.catalog.product(id: row.productID) else { throw DownloadError.unknownProduct(row.productID) }
        try await ledger.countAttempt(transactionID)
        return try await stream(row, product: product, head: request.head, token: false, context: context)
    }

    // MARK: GET /v1/downloads/{transactionId}

    @Sendable func status(_ request: Request, context: Context) async throws -> Response {
        let (transactionID, tokenProduct, _) = try authorize(request, context: context)
        guard let row = try await ledger.fulfilment(transactionID), row.productID == tokenProduct else {
            throw DownloadError.unknownTransaction(transactionID)
        }
        try await ensureNotRevoked(row)
        return try statusResponse(row)
    }

    // MARK: POST /v1/downloads/{transactionId}/ack

    @Sendable func acknowledge(_ request: Request, context: Context) async throws -> Response {
        let (transactionID, tokenProduct, _) = try authorize(request, context: context)
        guard let row = try await ledger.fulfilment(transactionID), row.productID == tokenProduct else {
            throw DownloadError.unknownTransaction(transactionID)
        }
        try await ensureNotRevoked(row)
        switch row.state {
        case .acknowledged:
            return try statusResponse(row)
        case .delivered:
            return try statusResponse(try await ledger.transition(transactionID, to: .acknowledged, error: nil))
        default:
            throw DownloadError.notDelivered(row.state)
        }
    }

    // MARK: Shared steps

    /// The transaction in the path and what its bearer token proves.
    private func authorize(_ request: Request, context: Context) throws -> (transactionID: String, productID: String, expired: Bool) {
        let transactionID = try context.parameters.require("transactionId")
        guard TransactionID.isValid(transactionID) else { throw DownloadError.badRequest("The transaction ID is malformed.") }
        guard let authorization = request.headers[.authorization] else { throw DownloadError.tokenMissing }
        guard authorization.lowercased().hasPrefix("bearer ") else { throw DownloadError.tokenMissing }
        switch tokens.check(String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces), transactionID: transactionID) {
        case .valid(let product): return (transactionID, product, false)
        case .expired(let product): return (transactionID, product, true)
        case .invalid: throw DownloadError.tokenInvalid
        }
    }

    private func entitledRow(_ transactionID: String, tokenProduct: String) async throws -> Fulfilment {
        guard let row = try await ledger.fulfilment(transactionID), row.productID == tokenProduct else {
            throw DownloadError.unknownTransaction(transactionID)
        }
        try await ensureNotRevoked(row)
        guard row.state.isEntitled else { throw DownloadError.notVerified(row.state) }
        return row
    }

    private func ensureNotRevoked(_ row: Fulfilment) async throws {
        if row.state == .revoked { throw DownloadError.revoked(row.transactionID) }
        if try await ledger.isRevoked(originalTransactionID: row.originalTransactionID) { throw DownloadError.revoked(row.transactionID) }
    }

    /// Streams the product's file; the ledger hears how the body ended.
    private func stream(_ row: Fulfilment, product: Product, head: HTTPRequest?, token: Bool, context: Context) async throws -> Response {
        var headers: HTTPFields = [
            .transactionID: row.transactionID, .location: "/v1/downloads/\(row.transactionID)/content", .cacheControl: "no-store",
        ]
        if token { headers[.downloadToken] = tokens.token(transactionID: row.transactionID, productID: product.productId) }
        // A POST answers with the whole file: Range applies to the resumable GET only.
        let plannedHead = head ?? HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")
        let ledger = self.ledger
        let logger = context.logger
        let transactionID = row.transactionID
        let size = product.size
        return try await responder.response(to: plannedHead, representation: product.representation, extraHeaders: headers) { report in
            do {
                try await ledger.recordDelivery(transactionID, report: report, fileSize: size)
            } catch {
                logger.error("could not record a download attempt", metadata: ["transaction": .string(transactionID), "error": "\(error)"])
            }
        }
    }

    private func statusResponse(_ row: Fulfilment) throws -> Response {
        let size = catalog.catalog.product(id: row.productID)?.size
        var object: [String: Any] = [
            "transactionId": row.transactionID, "originalTransactionId": row.originalTransactionID, "productId": row.productID,
            "state": row.state.rawValue, "bytesDelivered": row.bytesDelivered, "attempts": row.attempts,
            "safeToFinish": row.state.isSafeToFinish, "delivered": row.state == .delivered || row.state == .acknowledged,
        ]
        if let size { object["size"] = size }
        if let environment = row.environment { object["environment"] = environment.rawValue }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

extension HTTPField.Name {
    static let transactionID = Self("X-Transaction-Id")!
    static let downloadToken = Self("X-Download-Token")!
}

import Foundation
import HTTPTypes
import Hummingbird
import Logging
import StockroomCore
import StockroomHTTP
import StockroomEntitlement

/// The download routes: claim and stream (`POST /v1/downloads`), resume, status and ack.
///
/// Every decision is the entitlement component's; this controller parses, asks it, and maps its
/// answer to HTTP.
struct DownloadController<Context: ClientAddressContext & ConnectionContext, Store: ContentStore> {
    let catalog: CatalogStore
    let entitlements: Entitlements
    let responder: ContentResponder<Store>
    /// Concurrent streams, in all, per purchase and per client; a full house answers 429.
    let slots: DownloadSlots
    /// When set (`--offload`), nginx sends the bytes: answers carry `X-Accel-Redirect` and no body.
    var offload: OffloadResponder? = nil
    /// When set (`--content-delivery redirect`), the object store sends the bytes: answers are
    /// 303/307 to a presigned URL, and the acknowledgement records the delivery.
    var redirect: PresignedRedirect? = nil

    /// Whether someone else sends the bytes, so a download takes no stream slot.
    private var handsOff: Bool { offload != nil || redirect != nil }

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
        let prepared = try await prepare(product)
        let verdict = try await entitlements.judge(
            EntitlementRequest(
                productID: product.productId, transactionID: input.transactionID, originalTransactionID: input.originalTransactionID,
                proof: input.proof,
                appAccountToken: input.appAccountToken, client: context.clientAddress(of: request), customerConsented: input.consent))
        switch verdict {
        case .entitled(let row, let token):
            let slot = try acquireSlot(purchase: row.originalTransactionID, request: request, context: context)
            return try await stream(
                row, product: product, prepared: prepared, head: nil, token: token, tokenExpiry: entitlements.expiry(of: token), slot: slot,
                context: context)
        case .refused(let refusal):
            throw DownloadError.refused(refusal)
        case .unavailable(let retryAfter):
            throw DownloadError.upstreamUnavailable(retryAfter: retryAfter)
        case .limited(let retryAfter):
            throw DownloadError.rateLimited(retryAfter: retryAfter)
        }
    }

    // MARK: GET /v1/downloads/{transactionId}/content

    @Sendable func resume(_ request: Request, context: Context) async throws -> Response {
        let transactionID = try Self.transactionID(context)
        let bearer = Self.bearer(request)
        let productID: String
        switch entitlements.authorize(transactionID, bearer: bearer) {
        case .failure(let refusal): throw DownloadError.refused(refusal)
        case .success((_, true)): throw DownloadError.refused(.tokenExpired)
        case .success((let product, false)): productID = product
        }
        // The content, then a slot, before the ledger counts the attempt: content that cannot be
        // read, or a full house, changes nothing. The slot counts the purchase (original
        // transaction) the record names; the resume then decides.
        guard let product = catalog.catalog.product(id: productID) else { throw DownloadError.unknownProduct(productID) }
        let prepared: PreparedContent?
        do {
            prepared = try await prepare(product)
        } catch let failure as ContentError {
            // The token names a download that Stockroom's side could not serve: kept (once), so a
            // refund request is told the truth about who stopped the delivery.
            await recordFailure(transactionID, product: product, request: request, logger: context.logger)
            throw failure
        }
        let purchase = handsOff ? nil : try await entitlements.ledger.fulfilment(transactionID)?.originalTransactionID
        let slot = try acquireSlot(purchase: purchase ?? transactionID, request: request, context: context)
        let row = try await entitlements.resume(transactionID, bearer: bearer).orRefuse()
        return try await stream(
            row, product: product, prepared: prepared, head: request.head, token: nil,
            tokenExpiry: bearer.flatMap(entitlements.expiry(of:)), slot: slot,
            context: context)
    }

    // MARK: GET /v1/downloads/{transactionId}

    @Sendable func status(_ request: Request, context: Context) async throws -> Response {
        let transactionID = try Self.transactionID(context)
        return try statusResponse(try await entitlements.status(transactionID, bearer: Self.bearer(request)).orRefuse())
    }

    // MARK: POST /v1/downloads/{transactionId}/ack

    @Sendable func acknowledge(_ request: Request, context: Context) async throws -> Response {
        let transactionID = try Self.transactionID(context)
        return try statusResponse(
            try await entitlements.acknowledge(transactionID, bearer: Self.bearer(request), handedOff: redirect != nil).orRefuse())
    }

    // MARK: Shared steps

    private static func transactionID(_ context: Context) throws -> String {
        let transactionID = try context.parameters.require("transactionId")
        guard TransactionID.isValid(transactionID) else { throw DownloadError.badRequest("The transaction ID is malformed.") }
        return transactionID
    }

    /// The bearer token of `Authorization`, if any.
    private static func bearer(_ request: Request) -> String? {
        guard let authorization = request.headers[.authorization], authorization.lowercased().hasPrefix("bearer ") else { return nil }
        return String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces)
    }

    /// A stream's slot, or 429 with `Retry-After` when the server, this purchase or this client is
    /// at its limit. With offload nginx sends the bytes (with a redirect, the object store), so
    /// authorising takes no slot (nil).
    private func acquireSlot(purchase: String, request: Request, context: Context) throws(DownloadError) -> DownloadSlot? {
        guard !handsOff else { return nil }
        guard let slot = slots.acquire(purchase: purchase, client: context.clientAddress(of: request)) else {
            throw .busy(retryAfter: .seconds(5))
        }
        return slot
    }

    /// Streams the product's file; the ledger hears how the body ended, and the slot is given back.
    /// With offload, answers with the headers and `X-Accel-Redirect` instead, and nginx's report
    /// tells the ledger.
    /// The product's content checked (on disk, or in the bucket, as hashed) before the ledger
    /// hears of a download; nil with offload, whose responder checks it itself.
    private func prepare(_ product: Product) async throws -> PreparedContent? {
        guard offload == nil else { return nil }
        return try await responder.store.prepare(product.representation)
    }

    private func stream(
        _ row: Fulfilment, product: Product, prepared: PreparedContent?, head: HTTPRequest?, token: String?, tokenExpiry: Date?,
        slot: DownloadSlot?,
        context: Context
    ) async throws -> Response {
        let resumable = "/v1/downloads/\(row.transactionID)/content"
        var headers: HTTPFields = [.transactionID: row.transactionID, .location: resumable, .cacheControl: "no-store"]
        if let token { headers[.downloadToken] = token }
        if let redirect {
            // The store sends the bytes; the acknowledgement records the delivery. A claim is
            // answered 303 (GET the object), a resume 307, and Content-Location names where to
            // ask again for a fresh URL.
            headers[.location] = nil
            headers[.contentLocation] = resumable
            guard let prepared else { throw ContentError.changedSinceHashed(product.file) }
            let response = try await redirect.response(
                status: head == nil ? .seeOther : .temporaryRedirect, prepared: prepared, tokenExpiry: tokenExpiry, extraHeaders: headers)
            // Kept before the URL leaves: from here only an acknowledgement says the bytes arrived,
            // and a ledger that cannot keep that hands out no URL (503).
            try await entitlements.ledger.recordHandOff(row.transactionID, now: entitlements.now())
            return response
        }
        if let offload {
            // nginx sends the bytes after this response, and its report to OffloadReportListener
            // records the delivery.
            return try await offload.response(representation: product.representation, extraHeaders: headers)
        }
        // A POST answers with the whole file: Range applies to the resumable GET only.
        let plannedHead = head ?? HTTPRequest(method: .get, scheme: nil, authority: nil, path: "/")
        let ledger = entitlements.ledger
        let clock = entitlements.now
        let logger = context.logger
        let transactionID = row.transactionID
        let size = product.size
        let direct = await context.directBody()
        return try await responder.response(
            to: plannedHead, representation: product.representation, prepared: prepared, direct: direct, extraHeaders: headers
        ) { report in
            slot?.release()
            StockroomMetrics.bytesStreamed(report.bytesSent)
            do {
                try await ledger.recordDelivery(transactionID, report: report, fileSize: size, now: clock())
            } catch {
                logger.error("could not record a download attempt", metadata: ["transaction": .string(transactionID), "error": "\(error)"])
            }
        }
    }

    /// Records that an authorised download of `transactionID` failed on Stockroom's side before
    /// its body began (the content could not be read). Only what stopped a delivery counts: a
    /// GET, for a purchase entitled and not yet delivered, of this product, asking for bytes the
    /// ledger has not recorded as sent; and once, not per request (a failure already on record
    /// writes nothing), so a flood of resumes during an outage costs reads, not writes. A ledger
    /// that cannot record it is logged.
    private func recordFailure(_ transactionID: String, product: Product, request: Request, logger: Logger) async {
        guard request.method == .get else { return }
        do {
            // With a presigned URL handed out already, the store may have sent it all: the answer
            // is withheld whatever fails now, so nothing is written.
            guard let row = try await entitlements.ledger.fulfilment(transactionID), row.state == .verified,
                row.productID == product.productId, row.lastDeliveryEnding != .server, row.handedOffAt == nil
            else { return }
            if case .partial(let asked) = ContentPlan(fields: request.headers, representation: product.representation),
                row.sentVersion == product.representation.etag, let sent = row.sentBytes
            {
                var with = sent
                with.add(asked)
                if with == sent { return }  // every byte it asks for went out already
            }
            let report = DeliveryReport(range: nil, bytesSent: 0, ending: .server, version: product.representation.etag)
            try await entitlements.ledger.recordDelivery(transactionID, report: report, fileSize: product.size, now: entitlements.now())
        } catch {
            logger.error("could not record a failed download", metadata: ["transaction": .string(transactionID), "error": "\(error)"])
        }
    }

    private func statusResponse(_ row: Fulfilment) throws -> Response {
        let size = catalog.catalog.product(id: row.productID)?.size
        let status = DownloadStatus(
            transactionId: row.transactionID, originalTransactionId: row.originalTransactionID, productId: row.productID,
            state: row.state.rawValue, bytesDelivered: row.bytesDelivered, attempts: row.attempts, safeToFinish: row.state.isSafeToFinish,
            delivered: row.state == .delivered || row.state == .acknowledged, finishedByServer: row.finishedAt != nil,
            finishedAt: row.finishedAt.map(OperatorJSON.date), size: size, environment: row.environment?.rawValue,
            expiresAt: row.expiresAt.map(OperatorJSON.date), sentBytes: row.sentBytes?.description)
        let data = OperatorJSON.data(status)
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }
}

/// `GET /v1/downloads/{transactionId}`: where a purchase's delivery stands. Names are the JSON keys.
struct DownloadStatus: Encodable {
    var transactionId: String
    var originalTransactionId: String
    var productId: String
    var state: String
    var bytesDelivered: Int64
    var attempts: Int
    var safeToFinish: Bool
    var delivered: Bool
    var finishedByServer: Bool
    var finishedAt: String?
    var size: Int64?
    var environment: String?
    var expiresAt: String?
    /// The bytes the ledger records as sent, `first-last` ranges: an app that holds the file
    /// fetches the others again to make its delivery recorded.
    var sentBytes: String?
}

extension HTTPField.Name {
    static let transactionID = Self("X-Transaction-Id")!
    static let downloadToken = Self("X-Download-Token")!
}

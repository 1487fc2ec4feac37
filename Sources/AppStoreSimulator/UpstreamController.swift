import Foundation
import Hummingbird
import StockroomCore

/// Apple's wire protocol: `POST /verifyReceipt` (production) and `POST /sandbox/verifyReceipt`.
/// HTTP 200 always, unless a queued fault says otherwise; the verdict is `status`.
struct UpstreamController<Context: RequestContext> {
    let state: SimulatorState

    func addRoutes(to router: RouterGroup<Context>) {
        router.post("verifyReceipt") { request, context in
            try await verifyReceipt(request, context: context, environment: .production)
        }
        router.post("sandbox/verifyReceipt") { request, context in
            try await verifyReceipt(request, context: context, environment: .sandbox)
        }
        router.get("inApps/v1/transactions/:id") { request, context in
            try await serverAPITransaction(request, context: context, environment: .production)
        }
        router.get("sandbox/inApps/v1/transactions/:id") { request, context in
            try await serverAPITransaction(request, context: context, environment: .sandbox)
        }
    }

    /// The App Store Server API's transaction lookup, with the same faults as verifyReceipt.
    func serverAPITransaction(_ request: Request, context: Context, environment: StoreEnvironment) async throws -> Response {
        let fault = await state.begin("inApps", environment: environment)
        if let faulted = try await apply(fault) { return faulted }
        let (status, body) = await state.serverAPITransaction(
            try context.parameters.require("id"), authorization: request.headers[.authorization], environment: environment)
        return Response(
            status: .init(code: status), headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private struct RequestBody: Decodable {
        var receiptData: String?
        var password: String?

        enum CodingKeys: String, CodingKey {
            case receiptData = "receipt-data", password
        }
    }

    func verifyReceipt(_ request: Request, context: Context, environment: StoreEnvironment) async throws -> Response {
        let fault = await state.begin("verifyReceipt", environment: environment)
        if let faulted = try await apply(fault) { return faulted }
        let bytes = try await request.body.collect(upTo: 8 << 20)
        let decoded =
            JSONNesting.isShallow(bytes.readableBytesView) ? try? JSONDecoder().decode(RequestBody.self, from: Data(buffer: bytes)) : nil
        return try Self.json(await state.verify(receiptData: decoded?.receiptData, password: decoded?.password, endpoint: environment))
    }

    /// The configured latency, then the fault's misbehaviour: a response to send instead, or nil
    /// to answer normally.
    func apply(_ fault: Fault?) async throws -> Response? {
        let latency = state.configuration.latency
        if latency > .zero { try await Task.sleep(for: latency) }
        if let fault {
            switch fault.kind {
            case .delay:
                try await Task.sleep(for: .milliseconds(fault.delayMs ?? 0))
            case .httpStatus:
                var headers: HTTPFields = [.contentType: "text/plain"]
                if let retryAfter = fault.retryAfterHeader { headers[.retryAfter] = String(retryAfter) }
                return Response(
                    status: .init(code: fault.status ?? 503), headers: headers,
                    body: .init(byteBuffer: ByteBuffer(string: "simulated upstream failure")))
            case .malformed:
                return Response(
                    status: .ok, headers: [.contentType: "text/html"],
                    body: .init(byteBuffer: ByteBuffer(string: "<html><body>Service Unavailable</body></html>")))
            case .drop:
                // Promise a body, send a little, then fail: the connection closes mid-response.
                return Response(
                    status: .ok, headers: [.contentType: "application/json"],
                    body: .init(contentLength: 4096) { writer in
                        try await writer.write(ByteBuffer(string: #"{"status":"#))
                        throw SimulatedDrop()
                    })
            case .status:
                var body = VerifyReceiptBody(status: fault.status ?? 21005)
                body.isRetryable = fault.retryable
                body.retryableField = fault.retryableField ?? "is-retryable"
                return try Self.json(body)
            }
        }
        return nil
    }

    static func json(_ body: some Encodable) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes]
        return Response(
            status: .ok, headers: [.contentType: "application/json"],
            body: .init(byteBuffer: ByteBuffer(bytes: try encoder.encode(body))))
    }
}

/// Thrown mid-body to cut the connection, as the `drop` fault asks.
struct SimulatedDrop: Error {}

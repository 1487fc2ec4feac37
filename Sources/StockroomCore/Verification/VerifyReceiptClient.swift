import Foundation
import Logging

/// Apple's legacy verifyReceipt, over an `UpstreamTransport`: production first; 21007 → sandbox
/// once, 21008 → production once (never a loop); retries with backoff on transient failures;
/// 21002 retried at most once; all within a bounded time.
///
/// See https://developer.apple.com/documentation/appstorereceipts/verifyreceipt
public struct VerifyReceiptClient: Sendable {
    public let transport: any UpstreamTransport
    public let endpoints: AppStoreEndpoints
    /// The app's shared secret (`password`), needed for auto-renewable subscriptions.
    public let sharedSecret: String?
    public let policy: RetryPolicy
    private let logger: Logger

    public init(
        transport: any UpstreamTransport, endpoints: AppStoreEndpoints, sharedSecret: String? = nil,
        policy: RetryPolicy = .init(), logger: Logger = Logger(label: "stockroom.verify-receipt")
    ) {
        self.transport = transport
        self.endpoints = endpoints
        self.sharedSecret = sharedSecret
        self.policy = policy
        self.logger = logger
    }

    /// What Apple's answer means for the receipt.
    public enum Outcome: Sendable, Equatable {
        case receipt(VerifyReceiptAnswer)
        case rejected(RejectionReason)
        case unavailable(reason: String, retryAfter: Duration)
    }

    /// Asks Apple about `receiptData` (base64: an app receipt or a transaction receipt). Never
    /// throws: a fault is `.unavailable`; 21006 is a receipt marked `subscriptionExpired`.
    public func verify(receiptData: String) async -> Outcome {
        var environment = StoreEnvironment.production
        var switchedEnvironment = false
        var retriedMalformed = false
        let body = requestBody(receiptData)
        return await policy.run(leastUseful: .milliseconds(10)) { timeout in
            let response: VerifyReceiptResponse
            switch await call(environment: environment, body: body, timeout: timeout) {
            case .transient(let failure): return .retry(reason: failure)
            case .answer(let answer): response = answer
            }
            switch response.status {
            case 0:
                return .answered(interpret(response, calledAt: environment))
            case 21006:
                // Genuine, but the subscription has expired: never valid. With the receipt
                // in the answer the verifier names the expired transaction.
                guard response.receipt != nil || response.latestExpiredReceiptInfo != nil else {
                    return .answered(.rejected(.upstreamStatus(21006)))
                }
                var receipt = Self.receipt(from: response, calledAt: environment)
                receipt.subscriptionExpired = true
                return .answered(.receipt(receipt))
            case 21007 where environment == .production && !switchedEnvironment,
                21008 where environment == .sandbox && !switchedEnvironment:
                environment = environment == .production ? .sandbox : .production
                switchedEnvironment = true
                return .redirected()
            case 21007, 21008:
                return .answered(.rejected(.environmentMismatch))
            case 21002:
                guard !retriedMalformed else { return .answered(.rejected(.malformedReceipt)) }
                retriedMalformed = true
                return .retry(reason: "status 21002")
            case 21003:
                return .answered(.rejected(.notAuthentic))
            case _ where Self.isTransient(response):
                return .retry(reason: "status \(response.status)")
            case let status where Self.isOurFault(status):
                // A bad request or a wrong shared secret: keep the receipt, fix the configuration.
                logger.error("verifyReceipt refused our request", metadata: ["status": .stringConvertible(status)])
                return .answered(
                    .unavailable(
                        reason: "the App Store refused the request (status \(status)); check the shared secret",
                        retryAfter: policy.retryAfter))
            case let status:
                return .answered(.rejected(.upstreamStatus(status)))
            }
        } beforeRetry: { attempts, lastFailure in
            logger.debug("retrying verifyReceipt", metadata: ["attempt": .stringConvertible(attempts), "after": .string(lastFailure)])
        } givingUp: { attempts, lastFailure in
            logger.warning("verifyReceipt unavailable", metadata: ["attempts": .stringConvertible(attempts), "last": .string(lastFailure)])
            return .unavailable(
                reason: "the App Store did not answer usably after \(attempts) attempt(s): \(lastFailure)", retryAfter: policy.retryAfter)
        }
    }

    private enum Step {
        case answer(VerifyReceiptResponse)
        case transient(String)
    }

    private func call(environment: StoreEnvironment, body: [UInt8], timeout: Duration) async -> Step {
        let request = UpstreamRequest(
            method: .post, url: endpoints.url(for: environment), headers: [("Content-Type", "application/json")],
            body: body, timeout: timeout, endpoint: "verifyReceipt")
        let response: UpstreamResponse
        do {
            response = try await transport.send(request)
        } catch {
            return .transient("\(error)")
        }
        guard response.status == 200 else { return .transient("HTTP \(response.status)") }
        guard let decoded = UpstreamJSON.decode(VerifyReceiptResponse.self, from: response.body), decoded.status >= 0 else {
            return .transient("a body that is not verifyReceipt JSON")
        }
        return .answer(decoded)
    }

    /// 21005 (server unavailable), 21009 (internal data access), and 21100–21199 flagged retryable.
    static func isTransient(_ response: VerifyReceiptResponse) -> Bool {
        switch response.status {
        case 21005, 21009: true
        case 21100...21199: response.isRetryable
        default: false
        }
    }

    /// Statuses that blame the request, not the receipt: malformed request (21000), wrong
    /// shared secret (21004), and non-retryable internal errors (21100–21199).
    static func isOurFault(_ status: Int) -> Bool {
        status == 21000 || status == 21004 || (21100...21199).contains(status)
    }

    private func interpret(_ response: VerifyReceiptResponse, calledAt environment: StoreEnvironment) -> Outcome {
        .receipt(Self.receipt(from: response, calledAt: environment))
    }

    /// Both answer shapes in one `VerifyReceiptAnswer`: Apple's latest view first (expired ones last).
    static func receipt(from response: VerifyReceiptResponse, calledAt environment: StoreEnvironment) -> VerifyReceiptAnswer {
        VerifyReceiptAnswer(
            environment: response.environment ?? environment,
            bundleID: response.receipt?.bundleID,
            inApp: response.receipt?.inApp ?? [],
            latestReceiptInfo: (response.latestReceiptInfo ?? []) + (response.latestExpiredReceiptInfo ?? []))
    }

    private func requestBody(_ receiptData: String) -> [UInt8] {
        UpstreamBody.encode(RequestBody(receiptData: receiptData, password: sharedSecret)) ?? []
    }

    /// Apple's `requestBody`; without a shared secret, `password` is left out.
    ///
    /// See https://developer.apple.com/documentation/appstorereceipts/requestbody
    private struct RequestBody: Encodable {
        var receiptData: String
        var password: String?
        var excludeOldTransactions = false

        enum CodingKeys: String, CodingKey {
            case receiptData = "receipt-data", password, excludeOldTransactions = "exclude-old-transactions"
        }
    }
}

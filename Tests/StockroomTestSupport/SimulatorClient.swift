import Foundation
import Hummingbird
import HummingbirdTesting

/// The simulator's control API, driven through a live test client.
public struct SimulatorControl: Sendable {
    public let client: any TestClientProtocol
    public var baseURL: String { "http://127.0.0.1:\(client.port!)" }

    public init(_ client: any TestClientProtocol) {
        self.client = client
    }

    /// A purchase as `POST /sim/purchases` answers it.
    public struct Purchase: Decodable, Sendable {
        public var transactionId: String
        public var originalTransactionId: String
        public var productId: String
        public var bundleId: String
        public var environment: String
        public var deviceId: String
        public var receiptData: String
        public var signedTransaction: String
        /// `Non-Consumable`, `Auto-Renewable Subscription`, …
        public var type: String?
        /// A subscription's end, milliseconds since 1970.
        public var expiresDate: Int64?
        /// The iOS 6 transaction receipt, with `"receiptStyle": "transaction"`.
        public var transactionReceipt: String?
    }

    public func purchase(_ fields: [String: String]) async throws -> Purchase {
        try await purchase(json: fields)
    }

    /// A purchase with fields of any JSON type: `["productId": …, "expiresInSeconds": 60]`.
    public func purchase(json fields: [String: any Sendable]) async throws -> Purchase {
        let body = ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields))
        let response = try await client.execute(uri: "/sim/purchases", method: .post, body: body)
        guard response.status == .created else {
            throw SimulatorControlError(status: response.status.code, body: String(buffer: response.body))
        }
        return try JSONDecoder().decode(Purchase.self, from: Data(buffer: response.body))
    }

    /// A purchase whose answer also carries an iOS 6 transaction receipt.
    public func transactionPurchase(
        _ productId: String = "com.example.stockroom.demo.book1", environment: String = "Production", expiresInSeconds: Int? = nil
    ) async throws -> Purchase {
        var fields: [String: any Sendable] = ["productId": productId, "environment": environment, "receiptStyle": "transaction"]
        if let expiresInSeconds { fields["expiresInSeconds"] = expiresInSeconds }
        return try await purchase(json: fields)
    }

    public func purchase(_ productId: String = "com.example.stockroom.demo.book1", environment: String = "Production") async throws
        -> Purchase
    {
        try await purchase(["productId": productId, "environment": environment])
    }

    /// Refunds the transaction; returns its new signed transaction (with `revocationDate`).
    @discardableResult
    public func refund(_ transactionId: String) async throws -> String {
        let response = try await client.execute(uri: "/sim/transactions/\(transactionId)/refund", method: .post)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        return object?["signedTransaction"] as? String ?? ""
    }

    /// Queues a fault: `["kind": "status", "status": 21005, "count": 2]`.
    public func fault(_ fields: [String: any Sendable]) async throws {
        let body = try JSONSerialization.data(withJSONObject: fields)
        let response = try await client.execute(uri: "/sim/faults", method: .post, body: ByteBuffer(bytes: body))
        guard response.status == .created else {
            throw SimulatorControlError(status: response.status.code, body: String(buffer: response.body))
        }
    }

    /// Upstream calls the simulator received.
    public struct Calls: Equatable, Sendable, CustomStringConvertible {
        public var production: Int
        public var sandbox: Int
        public var total: Int

        public init(production: Int, sandbox: Int, total: Int) {
            self.production = production
            self.sandbox = sandbox
            self.total = total
        }

        public var description: String { "production \(production), sandbox \(sandbox), total \(total)" }
    }

    /// Calls received so far, per environment of verifyReceipt, and in all.
    public func calls() async throws -> Calls {
        let response = try await client.execute(uri: "/sim/stats", method: .get)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        let endpoints = object?["endpoints"] as? [String: [String: Int]]
        let verify = endpoints?["verifyReceipt"] ?? [:]
        return Calls(production: verify["Production"] ?? 0, sandbox: verify["Sandbox"] ?? 0, total: object?["total"] as? Int ?? -1)
    }

    /// Calls the App Store Server API endpoint received, in all environments.
    public func serverAPICalls() async throws -> Int {
        let response = try await client.execute(uri: "/sim/stats", method: .get)
        let object = try JSONSerialization.jsonObject(with: Data(buffer: response.body)) as? [String: Any]
        let endpoints = object?["endpoints"] as? [String: [String: Int]]
        return (endpoints?["inApps"] ?? [:]).values.reduce(0, +)
    }

    static func body(_ fields: [String: String]) throws -> ByteBuffer {
        ByteBuffer(bytes: try JSONSerialization.data(withJSONObject: fields))
    }
}

public struct SimulatorControlError: Error {
    public var status: Int
    public var body: String
}

import Foundation
import StockroomCore

/// The simulator's app receipt: a snapshot of one device's purchases for one app and
/// environment, signed with the simulator's key so a client can neither forge nor alter it.
///
/// Wire form: base64 of `SIMRECEIPT1.<base64url JSON payload>.<base64url HMAC-SHA256>`.
/// (Apple's PKCS#7 layout replaces this when the simulator issues real artefacts.)
struct SimulatedReceipt: Codable, Sendable, Equatable {
    var deviceID: String
    var bundleID: String
    var environment: StoreEnvironment
    var transactionIDs: [String]
    var createdMilliseconds: Int64

    private static let marker = "SIMRECEIPT1"

    /// The base64 `receipt-data` an app would send.
    func encoded(key: [UInt8]) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let payload = ByteEncoding.base64URL(Array(try encoder.encode(self)))
        let signingInput = Self.marker + "." + payload
        let signature = HMACSHA256.authenticationCode(for: Array(signingInput.utf8), key: key)
        return ByteEncoding.base64(Array((signingInput + "." + ByteEncoding.base64URL(signature)).utf8))
    }

    /// Why `receipt-data` was refused, in Apple's status codes.
    enum DecodingFailure: Error {
        /// 21002: not a receipt at all.
        case malformed
        /// 21003: shaped like a receipt, but not signed by this simulator.
        case notAuthentic
    }

    /// Reads and authenticates `receipt-data`.
    static func decode(_ receiptData: String, key: [UInt8]) throws(DecodingFailure) -> SimulatedReceipt {
        guard let bytes = ByteEncoding.decodeBase64(receiptData) else { throw .malformed }
        let parts = String(decoding: bytes, as: UTF8.self).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[0] == marker, let payload = ByteEncoding.decodeBase64(parts[1]) else { throw .malformed }
        guard let signature = ByteEncoding.decodeBase64(parts[2]),
            HMACSHA256.isValid(signature, for: Array("\(parts[0]).\(parts[1])".utf8), key: key)
        else { throw .notAuthentic }
        guard let receipt = try? JSONDecoder().decode(SimulatedReceipt.self, from: Data(payload)) else { throw .malformed }
        return receipt
    }
}

import Foundation

/// The signature on every webhook request, in one header:
///
///     Stockroom-Signature: t=1764216000,v1=5f2b…,v1=9c41…
///
/// `t` is when the request was signed (seconds since 1970) and each `v1` is the hex HMAC-SHA256,
/// under one of the endpoint's secrets, of `t`, a dot, and the body's exact bytes. While a secret
/// is rotated both are configured, and each signs: a receiver holding either accepts the request.
/// A receiver refuses a request whose `t` is further than the tolerance (five minutes) from its
/// own clock, which bounds how long a captured request can be replayed.
public enum WebhookSignature {
    public static let header = "Stockroom-Signature"
    /// How far a signature's time may be from the receiver's clock.
    public static let tolerance: TimeInterval = 300

    /// The header's value for `body` signed at `time` with each of `secrets`.
    public static func value(body: [UInt8], time: Date, secrets: [String]) -> String {
        let timestamp = String(Int64(time.timeIntervalSince1970.rounded(.down)))
        let signed = Array((timestamp + ".").utf8) + body
        let codes = secrets.map { "v1=" + ByteEncoding.hex(HMACSHA256.authenticationCode(for: signed, key: Array($0.utf8))) }
        return (["t=" + timestamp] + codes).joined(separator: ",")
    }

    /// Whether `value` signs `body` under one of `secrets`, at a time within `tolerance` of `now`:
    /// what a receiver checks (and the tests' receiver does). Compared in constant time.
    public static func isValid(_ value: String, body: [UInt8], secrets: [String], now: Date, tolerance: TimeInterval = tolerance) -> Bool {
        var timestamp: String?
        var codes: [[UInt8]] = []
        for part in value.split(separator: ",") {
            let pair = part.split(separator: "=", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            guard pair.count == 2 else { continue }
            switch pair[0] {
            case "t": timestamp = pair[1]
            case "v1": codes.append(Array(pair[1].utf8))
            default: continue
            }
        }
        guard let timestamp, let seconds = Int64(timestamp), abs(Double(seconds) - now.timeIntervalSince1970) <= tolerance else {
            return false
        }
        let signed = Array((timestamp + ".").utf8) + body
        for secret in secrets {
            let expected = Array(ByteEncoding.hex(HMACSHA256.authenticationCode(for: signed, key: Array(secret.utf8))).utf8)
            if codes.contains(where: { constantTimeEquals($0, expected) }) { return true }
        }
        return false
    }
}

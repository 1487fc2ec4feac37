import Foundation

/// Which servers the client's TLS connections trust: the system's authorities by default, or a
/// file of the app's own, and optionally a set of pinned public keys.
public struct TLSTrust: Sendable, Equatable {
    /// A PEM file of certificate authorities, trusted instead of the system's (curl's `--cacert`).
    public var certificateAuthorities: URL?
    /// Base64 SHA-256 digests of the server key's SubjectPublicKeyInfo (DER). When not empty, the
    /// server's certificate must carry one of them (curl's `--pinnedpubkey sha256//…`).
    public var pinnedPublicKeys: [String]

    /// The system's authorities, no pins.
    public static let system = TLSTrust()

    public init(certificateAuthorities: URL? = nil, pinnedPublicKeys: [String] = []) {
        self.certificateAuthorities = certificateAuthorities
        self.pinnedPublicKeys = pinnedPublicKeys
    }

    /// Whether anything differs from the system's defaults.
    var isCustom: Bool { certificateAuthorities != nil || !pinnedPublicKeys.isEmpty }

    /// Pins in curl's spelling, `sha256//BASE64`, several joined by `;`; nil when any part is not
    /// a base64 SHA-256.
    public static func pins(_ text: String) -> [String]? {
        var pins: [String] = []
        for part in text.split(separator: ";", omittingEmptySubsequences: false) {
            let trimmed = part.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("sha256//") else { return nil }
            let value = String(trimmed.dropFirst("sha256//".count))
            guard let bytes = Data(base64Encoded: value), bytes.count == 32 else { return nil }
            pins.append(value)
        }
        return pins.isEmpty ? nil : pins
    }

    /// The pins as libcurl's `CURLOPT_PINNEDPUBLICKEY` takes them.
    var curlPins: String? {
        pinnedPublicKeys.isEmpty ? nil : pinnedPublicKeys.map { "sha256//\($0)" }.joined(separator: ";")
    }
}

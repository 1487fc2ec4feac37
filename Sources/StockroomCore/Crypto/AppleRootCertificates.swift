import Foundation

/// Apple's public root certificates, shipped as resources of this module.
public enum AppleRootCertificates {
    /// Apple Root CA - G3: the root of StoreKit 2 signed transactions and notifications.
    public static func rootCAG3() throws -> Certificate { try load("AppleRootCA-G3") }

    /// Apple Inc. Root Certificate: the root of app receipts (PKCS#7).
    public static func incRoot() throws -> Certificate { try load("AppleIncRootCertificate") }

    private static func load(_ name: String) throws -> Certificate {
        guard let url = Bundle.module.url(forResource: name, withExtension: "pem") else {
            throw CryptoError.invalidCertificate("\(name).pem is missing from the bundle")
        }
        return try Certificate(pem: try String(contentsOf: url, encoding: .utf8))
    }
}

import Foundation

/// What pinning and an own authority need from certificates, read from their DER: the PEM blocks
/// of a CA file, and the SHA-256 of a certificate's SubjectPublicKeyInfo (the pin curl and HPKP
/// name `sha256//…`).
///
/// Pure Swift, so Linux tests check it against OpenSSL; on Apple platforms the trust glue
/// (`HTTPTransport+Trust`) hands it the certificates Security evaluated.
enum CertificateKey {
    /// The DER of each `CERTIFICATE` block of a PEM file, in order.
    static func certificates(inPEM data: Data) -> [[UInt8]] {
        let text = String(decoding: data, as: UTF8.self)
        var found: [[UInt8]] = []
        var body: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let line = line.trimmingCharacters(in: .whitespaces)
            if line == "-----BEGIN CERTIFICATE-----" {
                body = ""
            } else if line == "-----END CERTIFICATE-----" {
                if let body, let der = Data(base64Encoded: body) { found.append(Array(der)) }
                body = nil
            } else if body != nil {
                body! += line
            }
        }
        return found
    }

    /// The base64 SHA-256 of the certificate's SubjectPublicKeyInfo; nil when the DER is not a
    /// certificate's shape.
    static func pin(ofCertificate der: [UInt8]) -> String? {
        guard let spki = subjectPublicKeyInfo(der) else { return nil }
        var hasher = SHA256Digest()
        spki.withUnsafeBytes { hasher.update($0) }
        return Data(hasher.finalize()).base64EncodedString()
    }

    /// The whole SubjectPublicKeyInfo element of an X.509 certificate (RFC 5280 §4.1): the
    /// seventh field of `tbsCertificate` when `version` is present, the sixth otherwise.
    static func subjectPublicKeyInfo(_ der: [UInt8]) -> ArraySlice<UInt8>? {
        guard let certificate = DER.element(der[...]), certificate.tag == 0x30,
            let tbs = DER.element(certificate.content), tbs.tag == 0x30
        else { return nil }
        var rest = tbs.content
        var index = 0
        while let field = DER.element(rest) {
            if index == 0 && field.tag != 0xA0 { index = 1 }  // no explicit version: v1
            if index == 6 { return field.tag == 0x30 ? field.whole : nil }
            rest = rest[field.whole.endIndex...]
            index += 1
        }
        return nil
    }

    /// The smallest DER reader that walks a certificate: a tag, a definite length, the content.
    enum DER {
        struct Element {
            var tag: UInt8
            var content: ArraySlice<UInt8>
            var whole: ArraySlice<UInt8>
        }

        static func element(_ bytes: ArraySlice<UInt8>) -> Element? {
            var index = bytes.startIndex
            guard index < bytes.endIndex else { return nil }
            let tag = bytes[index]
            guard tag & 0x1F != 0x1F else { return nil }  // no multi-byte tags in a certificate's frame
            index += 1
            guard index < bytes.endIndex else { return nil }
            var length = Int(bytes[index])
            index += 1
            if length & 0x80 != 0 {
                let count = length & 0x7F
                guard (1...4).contains(count), bytes.endIndex - index >= count else { return nil }
                length = 0
                for _ in 0..<count {
                    length = length << 8 | Int(bytes[index])
                    index += 1
                }
            }
            guard length <= bytes.endIndex - index else { return nil }
            return Element(tag: tag, content: bytes[index..<(index + length)], whole: bytes[bytes.startIndex..<(index + length)])
        }
    }
}

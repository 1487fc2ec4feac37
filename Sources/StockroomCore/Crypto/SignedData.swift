import COpenSSL
import Foundation

/// PKCS#7 / CMS SignedData, as App Store receipts are: read (DER or BER with indefinite
/// lengths), its content taken without trust, its signature and chain verified at a given time,
/// or made (the simulator's receipts).
public enum SignedData {
    /// The signed content, read without verifying anything; nil when `bytes` are not SignedData.
    public static func content(of bytes: [UInt8]) -> [UInt8]? {
        guard let cms = parse(bytes) else { return nil }
        defer { CMS_ContentInfo_free(cms) }
        guard let pointer = CMS_get0_content(cms), let octets = pointer.pointee, let data = ASN1_STRING_get0_data(octets) else {
            return nil
        }
        return Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(octets))))
    }

    /// Nil when the signature verifies and its certificates chain to `root` at `time`; otherwise why not.
    public static func problem(verifying bytes: [UInt8], root: Certificate, at time: Date) -> String? {
        guard let seconds = CertificateTime.seconds(time) else { return "the verification time is outside the years 1 to 9999" }
        guard let cms = parse(bytes) else { return "not PKCS#7 SignedData" }
        defer { CMS_ContentInfo_free(cms) }
        guard let store = X509_STORE_new() else { return "no memory" }
        defer { X509_STORE_free(store) }
        guard X509_STORE_add_cert(store, root.x509) == 1, let parameters = X509_STORE_get0_param(store) else {
            return OpenSSLError.lastMessage()
        }
        X509_VERIFY_PARAM_set_time(parameters, seconds)
        // Apple's receipt-signing certificates are not S/MIME certificates: any purpose.
        X509_VERIFY_PARAM_set_purpose(parameters, X509_PURPOSE_ANY)
        guard let out = BIO_new(BIO_s_mem()) else { return "no memory" }
        defer { BIO_free(out) }
        let verified = withExtendedLifetime(root) { CMS_verify(cms, nil, store, nil, out, UInt32(CMS_BINARY)) }
        return verified == 1 ? nil : OpenSSLError.lastMessage()
    }

    /// `content` signed by `signer`, with `chain` (the certificates above the signer; the signer's
    /// own is added by OpenSSL) included, as BER with indefinite lengths.
    public static func sign(_ content: [UInt8], signer: Certificate, key: ECPrivateKey, chain: [Certificate]) throws(CryptoError) -> [UInt8]
    {
        guard let stack = stockroom_sk_X509_new_null() else { throw .openSSL("signing", "no memory") }
        defer { stockroom_sk_X509_free(stack) }
        for certificate in chain { _ = stockroom_sk_X509_push(stack, certificate.x509) }
        let result = content.withUnsafeBytes { buffer -> Result<[UInt8], CryptoError> in
            let input = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count))
            defer { BIO_free(input) }
            do throws(CryptoError) {
                return .success(try sign(input: input, signer: signer, key: key, stack: stack, keepAlive: chain))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    private static func sign(
        input: OpaquePointer?, signer: Certificate, key: ECPrivateKey, stack: OpaquePointer, keepAlive chain: [Certificate]
    ) throws(CryptoError) -> [UInt8] {
        let flags = UInt32(CMS_BINARY | CMS_STREAM)
        guard let cms = CMS_sign(signer.x509, key.key, stack, input, flags) else { throw .openSSL("CMS_sign", OpenSSLError.lastMessage()) }
        defer { CMS_ContentInfo_free(cms) }
        guard let out = BIO_new(BIO_s_mem()) else { throw .openSSL("signing", "no memory") }
        defer { BIO_free(out) }
        guard withExtendedLifetime((signer, key, chain), { i2d_CMS_bio_stream(out, cms, input, Int32(flags)) }) == 1 else {
            throw .openSSL("i2d_CMS_bio_stream", OpenSSLError.lastMessage())
        }
        var data: UnsafeMutablePointer<CChar>?
        let length = stockroom_BIO_get_mem_data(out, &data)
        guard length > 0, let data else { throw .openSSL("signing", "empty output") }
        return Array(UnsafeRawBufferPointer(start: data, count: length))
    }

    private static func parse(_ bytes: [UInt8]) -> OpaquePointer? {
        guard !bytes.isEmpty, bytes.count < Int(Int32.max) else { return nil }
        // The BIO reads the array's memory: it lives only inside the closure.
        return bytes.withUnsafeBytes { buffer in
            let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count))
            defer { BIO_free(bio) }
            return d2i_CMS_bio(bio, nil)
        }
    }
}

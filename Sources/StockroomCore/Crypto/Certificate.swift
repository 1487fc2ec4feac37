import COpenSSL
import Foundation

/// An X.509 certificate: parsed from DER or PEM, checked for Apple's marker OIDs, verified in a
/// chain, or issued (the simulator's test CA).
public final class Certificate: @unchecked Sendable {
    let x509: OpaquePointer

    private init(owning x509: OpaquePointer) {
        self.x509 = x509
    }

    deinit { X509_free(x509) }

    /// A DER certificate (an `x5c` entry, once base64-decoded).
    public convenience init(der: [UInt8]) throws(CryptoError) {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw .invalidCertificate(OpenSSLError.lastMessage()) }
        self.init(owning: parsed)
    }

    /// The first certificate of a PEM text.
    public convenience init(pem: String) throws(CryptoError) {
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { buffer in
            guard let length = Int32(exactly: buffer.count) else { return nil }  // OpenSSL's BIO takes an int
            let bio = BIO_new_mem_buf(buffer.baseAddress, length)
            defer { BIO_free(bio) }
            return PEM_read_bio_X509(bio, nil, nil, nil)
        }
        guard let parsed else { throw .invalidCertificate(OpenSSLError.lastMessage()) }
        self.init(owning: parsed)
    }

    public var der: [UInt8] {
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &pointer)
        guard length > 0, let pointer else { return [] }
        defer { stockroom_OPENSSL_free(pointer) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }

    public var pem: String {
        guard let bio = BIO_new(BIO_s_mem()) else { return "" }
        defer { BIO_free(bio) }
        PEM_write_bio_X509(bio, x509)
        return BIOText.read(bio)
    }

    /// Whether `date` lies within the certificate's validity, as `X509_verify_cert` judges it.
    public func isValid(at date: Date) -> Bool {
        guard let seconds = CertificateTime.seconds(date), let validity else { return false }
        return validity.contains(Int64(seconds))
    }

    /// The validity in whole seconds since 1970, as OpenSSL judges it: valid at `t` when
    /// `notBefore ≤ t < notAfter` (`X509_cmp_time` counts an equal time as earlier). Nil when a
    /// time cannot be read.
    public var validity: Range<Int64>? {
        func seconds(_ time: UnsafePointer<ASN1_TIME>?) -> Int64? {
            var fields = tm()
            guard let time, ASN1_TIME_to_tm(time, &fields) == 1 else { return nil }
            return Int64(timegm(&fields))
        }
        guard let notBefore = seconds(X509_get0_notBefore(x509)), let notAfter = seconds(X509_get0_notAfter(x509)) else { return nil }
        return notBefore..<max(notBefore, notAfter)
    }

    /// The subject, one line (`/CN=…`).
    public var subject: String {
        guard let line = X509_NAME_oneline(X509_get_subject_name(x509), nil, 0) else { return "" }
        defer { stockroom_OPENSSL_free(line) }
        return String(cString: line)
    }

    /// Whether the certificate carries an extension with this dotted OID.
    public func hasExtension(oid: String) -> Bool {
        guard let object = OBJ_txt2obj(oid, 1) else { return false }
        defer { ASN1_OBJECT_free(object) }
        return X509_get_ext_by_OBJ(x509, object, -1) >= 0
    }

    /// The subject's public key, when it is an EC key.
    public var publicKey: ECPublicKey? {
        guard let key = X509_get_pubkey(x509) else { return nil }
        return ECPublicKey(owning: key)
    }

    /// Issues a certificate for `subjectKey`, signed by `issuer` (self-signed when nil), with
    /// `markerOIDs` as non-critical extensions holding ASN.1 NULL, as Apple's are.
    public static func issue(
        commonName: String, subjectKey: ECPrivateKey, issuer: (certificate: Certificate, key: ECPrivateKey)?,
        isAuthority: Bool, notBefore: Date, notAfter: Date, markerOIDs: [String] = [], serial: Int = 1
    ) throws(CryptoError) -> Certificate {
        guard let notBeforeSeconds = CertificateTime.seconds(notBefore), let notAfterSeconds = CertificateTime.seconds(notAfter) else {
            throw .openSSL("certificate validity", "a date outside the years 1 to 9999")
        }
        guard let x509 = X509_new() else { throw .openSSL("certificate creation", "no memory") }
        let certificate = Certificate(owning: x509)
        var ok = X509_set_version(x509, 2) == 1
        ok = ok && ASN1_INTEGER_set(X509_get_serialNumber(x509), serial) == 1
        ok = ok && ASN1_TIME_set(X509_getm_notBefore(x509), notBeforeSeconds) != nil
        ok = ok && ASN1_TIME_set(X509_getm_notAfter(x509), notAfterSeconds) != nil
        ok = ok && X509_set_pubkey(x509, subjectKey.key) == 1
        let name = X509_get_subject_name(x509)
        ok = ok && X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, commonName, -1, -1, 0) == 1
        ok = ok && X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, "Stockroom App Store Simulator", -1, -1, 0) == 1
        ok = ok && X509_set_issuer_name(x509, issuer.map { X509_get_subject_name($0.certificate.x509) } ?? name) == 1
        guard ok else { throw .openSSL("certificate fields", OpenSSLError.lastMessage()) }

        var context = X509V3_CTX()
        X509V3_set_ctx(&context, issuer?.certificate.x509 ?? x509, x509, nil, nil, 0)
        let extensions: [(Int32, String)] =
            isAuthority
            ? [
                (NID_basic_constraints, "critical,CA:TRUE"), (NID_key_usage, "critical,keyCertSign,cRLSign"),
                (NID_subject_key_identifier, "hash"),
            ]
            : [
                (NID_basic_constraints, "critical,CA:FALSE"), (NID_key_usage, "critical,digitalSignature"),
                (NID_subject_key_identifier, "hash"),
            ]
        for (nid, value) in extensions {
            guard let ext = X509V3_EXT_conf_nid(nil, &context, nid, value) else {
                throw .openSSL("extension \(nid)", OpenSSLError.lastMessage())
            }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw .openSSL("extension \(nid)", OpenSSLError.lastMessage()) }
        }
        for oid in markerOIDs {
            guard let object = OBJ_txt2obj(oid, 1), let value = ASN1_OCTET_STRING_new() else { throw .openSSL("marker \(oid)", "bad OID") }
            defer {
                ASN1_OBJECT_free(object)
                ASN1_OCTET_STRING_free(value)
            }
            let null: [UInt8] = [0x05, 0x00]
            guard ASN1_OCTET_STRING_set(value, null, 2) == 1,
                let ext = X509_EXTENSION_create_by_OBJ(nil, object, 0, value)
            else { throw .openSSL("marker \(oid)", OpenSSLError.lastMessage()) }
            defer { X509_EXTENSION_free(ext) }
            guard X509_add_ext(x509, ext, -1) == 1 else { throw .openSSL("marker \(oid)", OpenSSLError.lastMessage()) }
        }
        guard X509_sign(x509, (issuer?.key ?? subjectKey).key, EVP_sha256()) > 0 else {
            throw .openSSL("certificate signing", OpenSSLError.lastMessage())
        }
        return certificate
    }
}

/// Verifies a leaf certificate through intermediates to one trusted root, at a given time.
public enum CertificateChain {
    /// Nil when the chain verifies at `time`; otherwise OpenSSL's reason.
    public static func problem(leaf: Certificate, intermediates: [Certificate], root: Certificate, at time: Date) -> String? {
        guard let seconds = CertificateTime.seconds(time) else { return "the verification time is outside the years 1 to 9999" }
        guard let store = X509_STORE_new() else { return "no memory" }
        defer { X509_STORE_free(store) }
        guard X509_STORE_add_cert(store, root.x509) == 1, let stack = stockroom_sk_X509_new_null() else {
            return OpenSSLError.lastMessage()
        }
        defer { stockroom_sk_X509_free(stack) }
        for certificate in intermediates { _ = stockroom_sk_X509_push(stack, certificate.x509) }
        guard let context = X509_STORE_CTX_new() else { return "no memory" }
        defer { X509_STORE_CTX_free(context) }
        guard X509_STORE_CTX_init(context, store, leaf.x509, stack) == 1 else { return OpenSSLError.lastMessage() }
        X509_VERIFY_PARAM_set_time(X509_STORE_CTX_get0_param(context), seconds)
        let verified = withExtendedLifetime((leaf, intermediates, root)) { X509_verify_cert(context) }
        guard verified == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            return String(cString: X509_verify_cert_error_string(Int(code)))
        }
        return nil
    }
}

import COpenSSL
import Foundation

/// One certificate's OCSP question (RFC 6960) and the reading of its answer, through OpenSSL's
/// OCSP API: the request names the certificate by its issuer and serial; an answer counts only
/// once its signature verifies to the trusted root, by the issuer or a responder it delegated to.
///
/// See https://datatracker.ietf.org/doc/html/rfc6960
public struct OCSPQuery: Sendable {
    public let certificate: Certificate
    public let issuer: Certificate

    public init(certificate: Certificate, issuer: Certificate) {
        self.certificate = certificate
        self.issuer = issuer
    }

    /// The DER `OCSPRequest` for the certificate: one CertID (SHA-1, as responders expect), no
    /// nonce (an answer is kept and reused until its `nextUpdate`, so a nonce would prove nothing).
    public func request() throws(CryptoError) -> [UInt8] {
        guard let id = OCSP_cert_to_id(nil, certificate.x509, issuer.x509) else {
            throw .openSSL("OCSP certificate ID", OpenSSLError.lastMessage())
        }
        guard let request = OCSP_REQUEST_new() else {
            OCSP_CERTID_free(id)
            throw .openSSL("OCSP request", "no memory")
        }
        defer { OCSP_REQUEST_free(request) }
        guard OCSP_request_add0_id(request, id) != nil else {
            OCSP_CERTID_free(id)
            throw .openSSL("OCSP request", OpenSSLError.lastMessage())
        }
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_OCSP_REQUEST(request, &pointer)
        guard length > 0, let pointer else { throw .openSSL("OCSP request encoding", OpenSSLError.lastMessage()) }
        defer { stockroom_OPENSSL_free(pointer) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }

    /// What a responder's DER answer says about the certificate, or why it says nothing usable:
    /// not an OCSP response, not successful, a signature that does not verify to `root` (with
    /// `chain`'s certificates as intermediates), no status for this certificate, or a good or
    /// unknown status outside its `thisUpdate`…`nextUpdate` window (5 minutes' leeway; a day
    /// at most when there is no `nextUpdate`). A revoked status that verified stands whenever
    /// it was issued: a revocation is never undone.
    public func read(_ response: [UInt8], root: Certificate, chain: [Certificate]) -> Result<OCSPAnswer, OCSPAnswer.Unusable> {
        let parsed: OpaquePointer? = response.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_OCSP_RESPONSE(nil, &cursor, buffer.count)
        }
        guard let parsed else { return .failure(.init("not a DER OCSP response")) }
        defer { OCSP_RESPONSE_free(parsed) }
        let responseStatus = OCSP_response_status(parsed)
        guard responseStatus == OCSP_RESPONSE_STATUS_SUCCESSFUL else {
            return .failure(.init("the responder answered \(String(cString: OCSP_response_status_str(Int(responseStatus))))"))
        }
        guard let basic = OCSP_response_get1_basic(parsed) else { return .failure(.init("no basic OCSP response")) }
        defer { OCSP_BASICRESP_free(basic) }
        if let problem = Self.signatureProblem(basic, root: root, chain: chain) { return .failure(.init(problem)) }

        guard let id = OCSP_cert_to_id(nil, certificate.x509, issuer.x509) else { return .failure(.init(OpenSSLError.lastMessage())) }
        defer { OCSP_CERTID_free(id) }
        var status: Int32 = -1
        var reason: Int32 = -1
        var revokedAt: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var thisUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        var nextUpdate: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>?
        guard OCSP_resp_find_status(basic, id, &status, &reason, &revokedAt, &thisUpdate, &nextUpdate) == 1 else {
            return .failure(.init("the answer holds no status for this certificate"))
        }
        let next = nextUpdate.flatMap(Self.date)
        switch status {
        case V_OCSP_CERTSTATUS_REVOKED:
            return .success(OCSPAnswer(status: .revoked, nextUpdate: next))
        case V_OCSP_CERTSTATUS_GOOD, V_OCSP_CERTSTATUS_UNKNOWN:
            guard OCSP_check_validity(thisUpdate, nextUpdate, 300, nextUpdate == nil ? 86_400 : -1) == 1 else {
                _ = OpenSSLError.lastMessage()  // drained: the reason is ours
                return .failure(.init("the answer is outside its thisUpdate…nextUpdate window"))
            }
            return .success(OCSPAnswer(status: status == V_OCSP_CERTSTATUS_GOOD ? .good : .unknown, nextUpdate: next))
        default:
            return .failure(.init("an unknown certificate status \(status)"))
        }
    }

    /// Nil when the answer's signature verifies: by the issuer, or a responder the issuer
    /// delegated to (extended key usage OCSPSigning), chaining to `root` at the current time.
    private static func signatureProblem(_ basic: OpaquePointer, root: Certificate, chain: [Certificate]) -> String? {
        guard let store = X509_STORE_new() else { return "no memory" }
        defer { X509_STORE_free(store) }
        guard X509_STORE_add_cert(store, root.x509) == 1, let stack = stockroom_sk_X509_new_null() else {
            return OpenSSLError.lastMessage()
        }
        defer { stockroom_sk_X509_free(stack) }
        for certificate in chain { _ = stockroom_sk_X509_push(stack, certificate.x509) }
        let verified = withExtendedLifetime((root, chain)) { OCSP_basic_verify(basic, stack, store, 0) }
        guard verified == 1 else { return "the answer's signature does not verify: \(OpenSSLError.lastMessage())" }
        return nil
    }

    private static func date(_ time: UnsafeMutablePointer<ASN1_GENERALIZEDTIME>) -> Date? {
        var fields = tm()
        guard ASN1_TIME_to_tm(time, &fields) == 1 else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&fields)))
    }
}

/// A usable OCSP answer about one certificate.
public struct OCSPAnswer: Sendable, Equatable {
    /// RFC 6960's `CertStatus`.
    public enum Status: String, Sendable, Equatable {
        case good, revoked, unknown
    }

    public var status: Status
    /// When the responder will have newer information: the answer is not kept past it.
    public var nextUpdate: Date?

    /// Why an answer says nothing usable (it is not kept).
    public struct Unusable: Error, Equatable, CustomStringConvertible {
        public let description: String
        init(_ description: String) { self.description = description }
    }
}

extension Certificate {
    /// The OCSP responders the certificate names (its Authority Information Access extension,
    /// `id-ad-ocsp`), http and https only, in order.
    public var ocspResponders: [String] {
        guard let stack = X509_get1_ocsp(x509) else { return [] }
        defer { X509_email_free(stack) }
        return (0..<stockroom_sk_OPENSSL_STRING_num(stack)).compactMap { index in
            stockroom_sk_OPENSSL_STRING_value(stack, index).map { String(cString: $0) }
        }.filter { $0.hasPrefix("http://") || $0.hasPrefix("https://") }
    }

    /// The SHA-256 of the DER, in hex: what a certificate's revocation answer is kept under.
    public var fingerprint: String { ByteEncoding.hex(SHA256.hash(der)) }
}

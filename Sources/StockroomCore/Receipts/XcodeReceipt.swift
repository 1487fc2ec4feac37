import COpenSSL
import Foundation

/// Verifies app receipts from StoreKit Testing in Xcode locally (`--accept-xcode`): receipt type
/// `Xcode`, PKCS#7 signed by the StoreKit Test certificate the receipt carries (one,
/// self-signed) or, when pinned, by the certificate exported from Xcode. Every other receipt
/// goes to `upstream` unchanged. Accepted purchases are recorded as `Sandbox`.
///
/// See https://developer.apple.com/documentation/xcode/setting-up-storekit-testing-in-xcode
/// ("Validate receipts": the StoreKit Test certificate replaces Apple's root for local validation).
public struct XcodeReceiptVerifier: ReceiptVerifier {
    /// The receipt type (attribute 0) Xcode writes.
    public static let receiptType = "Xcode"
    public let upstream: any ReceiptVerifier
    public let bundleID: String
    /// The StoreKit Test certificate exported from Xcode; nil trusts the one inside the receipt.
    public let pinned: Certificate?
    public let now: @Sendable () -> Date

    public init(upstream: any ReceiptVerifier, bundleID: String, pinned: Certificate?, now: @escaping @Sendable () -> Date = { Date() }) {
        self.upstream = upstream
        self.bundleID = bundleID
        self.pinned = pinned
        self.now = now
    }

    public func verify(_ request: VerificationRequest, freshness: VerificationFreshness) async -> ReceiptVerdict {
        guard let proof = ReceiptProof.parse(request.receiptData) else { return await upstream.verify(request, freshness: freshness) }
        return await verify(proof, productID: request.productID, transactionID: request.transactionID, freshness: freshness)
    }

    public func verify(_ proof: ReceiptProof, productID: String?, transactionID: String?, freshness: VerificationFreshness) async
        -> ReceiptVerdict
    {
        guard proof.kind == .appReceipt, let bytes = ByteEncoding.decodeBase64(proof.text),
            let payload = SignedData.claimedContent(of: bytes),
            let receipt = AppReceipt.decode(payload: payload), receipt.receiptType == Self.receiptType
        else { return await upstream.verify(proof, productID: productID, transactionID: transactionID, freshness: freshness) }
        guard let signer = pinned ?? Self.selfSignedCertificate(in: bytes, at: receipt.creationDate),
            SignedData.problem(verifying: bytes, root: signer, at: receipt.creationDate) == nil
        else { return .invalid(.notAuthentic) }
        return check(receipt, productID: productID, transactionID: transactionID)
    }

    /// An Xcode receipt is checked locally for each transaction; any other goes upstream once.
    public func verify(_ proof: ReceiptProof, transactionIDs: [String], freshness: VerificationFreshness) async -> [String: ReceiptVerdict]
    {
        guard proof.kind == .appReceipt, let bytes = ByteEncoding.decodeBase64(proof.text),
            let payload = SignedData.claimedContent(of: bytes),
            let receipt = AppReceipt.decode(payload: payload), receipt.receiptType == Self.receiptType
        else { return await upstream.verify(proof, transactionIDs: transactionIDs, freshness: freshness) }
        var verdicts: [String: ReceiptVerdict] = [:]
        for id in transactionIDs { verdicts[id] = await verify(proof, productID: nil, transactionID: id, freshness: freshness) }
        return verdicts
    }

    /// Stockroom's checks on a receipt that verified: bundle, transaction, product, refund, expiry.
    func check(_ receipt: AppReceipt, productID: String?, transactionID: String?) -> ReceiptVerdict {
        guard receipt.bundleID == bundleID else { return .invalid(.bundleMismatch(expected: bundleID, actual: receipt.bundleID)) }
        guard !receipt.purchases.isEmpty else { return .invalid(.emptyReceipt) }
        let transactions = receipt.purchases.map(Self.transaction)
        var chosen: ReceiptTransaction?
        if let transactionID {
            guard let named = transactions.first(where: { $0.transactionID == transactionID }) else {
                return .invalid(.transactionNotInReceipt(transactionID))
            }
            if let productID, named.productID != productID {
                return .invalid(.productMismatch(transactionID: transactionID, productID: productID))
            }
            chosen = named
        } else if let productID {
            guard let latest = receipt.latestPurchase(of: productID) else { return .invalid(.productNotInReceipt(productID)) }
            chosen = Self.transaction(latest)
        }
        if let chosen, chosen.isCancelled { return .invalid(.revoked(chosen)) }
        if let chosen, chosen.isExpired(at: now()) { return .invalid(.expired(chosen)) }
        return .valid(VerifiedReceipt(environment: .sandbox, bundleID: receipt.bundleID, transaction: chosen, transactions: transactions))
    }

    private static func transaction(_ purchase: AppReceipt.Purchase) -> ReceiptTransaction {
        ReceiptTransaction(
            transactionID: purchase.transactionID, originalTransactionID: purchase.originalTransactionID, productID: purchase.productID,
            quantity: Int(clamping: purchase.quantity), purchaseDate: Milliseconds.of(purchase.purchaseDate),
            cancellationDate: purchase.cancellationDate.map(Milliseconds.of), expiresDate: purchase.expiresDate.map(Milliseconds.of))
    }

    /// The one certificate a receipt carries, when it is self-signed and valid at `time`.
    static func selfSignedCertificate(in bytes: [UInt8], at time: Date) -> Certificate? {
        let certificates = embeddedCertificates(bytes)
        guard certificates.count == 1, let only = certificates.first,
            CertificateChain.problem(leaf: only, intermediates: [], root: only, at: time) == nil
        else { return nil }
        return only
    }

    /// The certificates inside a PKCS#7 SignedData, copied out as DER (OpenSSL's own stay here).
    static func embeddedCertificates(_ bytes: [UInt8]) -> [Certificate] {
        guard !bytes.isEmpty, let length = Int32(exactly: bytes.count) else { return [] }
        let cms: OpaquePointer? = bytes.withUnsafeBytes { buffer in
            let bio = BIO_new_mem_buf(buffer.baseAddress, length)
            defer { BIO_free(bio) }
            return d2i_CMS_bio(bio, nil)
        }
        guard let cms else { return [] }
        defer { CMS_ContentInfo_free(cms) }
        guard let stack = CMS_get1_certs(cms) else { return [] }
        defer { stockroom_sk_X509_pop_free(stack) }
        var certificates: [Certificate] = []
        for index in 0..<min(stockroom_sk_X509_num(stack), 8) {
            var der: UnsafeMutablePointer<UInt8>?
            let count = i2d_X509(stockroom_sk_X509_value(stack, index), &der)
            guard count > 0, let der else { continue }
            defer { stockroom_OPENSSL_free(der) }
            if let certificate = try? Certificate(der: Array(UnsafeBufferPointer(start: der, count: Int(count)))) {
                certificates.append(certificate)
            }
        }
        return certificates
    }
}

import Foundation

/// An app receipt's payload: the ASN.1 attributes Apple documents.
///
/// See https://developer.apple.com/library/archive/releasenotes/General/ValidateAppStoreReceipt/Chapters/ReceiptFields.html
public struct AppReceipt: Sendable, Equatable {
    /// Attribute 0: `Production`, `ProductionSandbox`, … (not always present).
    public var receiptType: String?
    /// Attribute 2.
    public var bundleID: String
    /// Attribute 3.
    public var appVersion: String
    /// Attribute 4: device-specific bytes (the simulator keeps its device ID here).
    public var opaqueValue: [UInt8]
    /// Attribute 12: when the receipt was created; certificate validity is judged then.
    public var creationDate: Date
    /// Attribute 17, one per in-app purchase.
    public var purchases: [Purchase]

    /// One in-app purchase (attribute 17's nested set).
    public struct Purchase: Sendable, Equatable {
        public var quantity: Int64  // 1701
        public var productID: String  // 1702
        public var transactionID: String  // 1703
        public var purchaseDate: Date  // 1704
        public var originalTransactionID: String  // 1705
        public var cancellationDate: Date?  // 1712
        /// A subscription's end (attribute 1708); nil for other products.
        public var expiresDate: Date?  // 1708

        public init(
            quantity: Int64, productID: String, transactionID: String, purchaseDate: Date, originalTransactionID: String,
            cancellationDate: Date?,
            expiresDate: Date? = nil
        ) {
            self.quantity = quantity
            self.productID = productID
            self.transactionID = transactionID
            self.purchaseDate = purchaseDate
            self.originalTransactionID = originalTransactionID
            self.cancellationDate = cancellationDate
            self.expiresDate = expiresDate
        }
    }

    public init(receiptType: String?, bundleID: String, appVersion: String, opaqueValue: [UInt8], creationDate: Date, purchases: [Purchase])
    {
        self.receiptType = receiptType
        self.bundleID = bundleID
        self.appVersion = appVersion
        self.opaqueValue = opaqueValue
        self.creationDate = creationDate
        self.purchases = purchases
    }

    /// Reads the payload (a DER SET of attributes); nil when it is not one, or lacks bundle
    /// ID, version or creation date.
    public static func decode(payload: [UInt8]) -> AppReceipt? {
        guard let attributes = attributes(payload[...]) else { return nil }
        var receipt = AppReceipt(receiptType: nil, bundleID: "", appVersion: "", opaqueValue: [], creationDate: .distantPast, purchases: [])
        var seen = Set<Int64>()
        for (type, value) in attributes {
            seen.insert(type)
            switch type {
            case 0: receipt.receiptType = string(value)
            case 2: guard let text = string(value) else { return nil }; receipt.bundleID = text
            case 3: guard let text = string(value) else { return nil }; receipt.appVersion = text
            case 4: receipt.opaqueValue = Array(value)
            case 12: guard let date = date(value) else { return nil }; receipt.creationDate = date
            case 17: guard let purchase = purchase(value) else { return nil }; receipt.purchases.append(purchase)
            default: break
            }
        }
        guard seen.isSuperset(of: [2, 3, 12]) else { return nil }
        return receipt
    }

    /// Reads a base64 receipt's payload without verifying anything: enough to learn transaction
    /// IDs before asking Apple, never enough to trust them.
    public static func readUntrusted(base64 text: String) -> AppReceipt? {
        guard let bytes = ByteEncoding.decodeBase64(text), let payload = SignedData.content(of: bytes) else { return nil }
        return decode(payload: payload)
    }

    /// The most recent purchase of `productID` the receipt lists.
    public func latestPurchase(of productID: String) -> Purchase? {
        purchases.filter { $0.productID == productID }.max { $0.purchaseDate < $1.purchaseDate }
    }

    /// The DER payload (what the simulator signs).
    public func encodedPayload() -> [UInt8] {
        var parts = [
            DERWriter.attribute(2, DERWriter.utf8(bundleID)), DERWriter.attribute(3, DERWriter.utf8(appVersion)),
            DERWriter.attribute(4, opaqueValue), DERWriter.attribute(12, DERWriter.ia5(Self.format(creationDate))),
        ]
        if let receiptType { parts.insert(DERWriter.attribute(0, DERWriter.utf8(receiptType)), at: 0) }
        for purchase in purchases {
            let fields = [
                DERWriter.attribute(1701, DERWriter.integer(purchase.quantity)),
                DERWriter.attribute(1702, DERWriter.utf8(purchase.productID)),
                DERWriter.attribute(1703, DERWriter.utf8(purchase.transactionID)),
                DERWriter.attribute(1704, DERWriter.ia5(Self.format(purchase.purchaseDate))),
                DERWriter.attribute(1705, DERWriter.utf8(purchase.originalTransactionID)),
                DERWriter.attribute(1708, DERWriter.ia5(purchase.expiresDate.map(Self.format) ?? "")),
                DERWriter.attribute(1712, DERWriter.ia5(purchase.cancellationDate.map(Self.format) ?? "")),
            ]
            parts.append(DERWriter.attribute(17, DERWriter.set(fields)))
        }
        return DERWriter.set(parts)
    }

    // MARK: Reading

    /// `SET OF SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
    private static func attributes(_ bytes: ArraySlice<UInt8>) -> [(Int64, ArraySlice<UInt8>)]? {
        var outer = DERReader(bytes)
        guard let set = outer.next(), set.tag == 0x31, outer.isAtEnd else { return nil }
        var reader = DERReader(set.value)
        var attributes: [(Int64, ArraySlice<UInt8>)] = []
        while !reader.isAtEnd {
            guard let sequence = reader.next(), sequence.tag == 0x30 else { return nil }
            var fields = DERReader(sequence.value)
            guard let type = fields.next(), type.tag == 0x02, let typeValue = DERReader.integer(type.value),
                let version = fields.next(), version.tag == 0x02,
                let value = fields.next(), value.tag == 0x04
            else { return nil }
            attributes.append((typeValue, value.value))
        }
        return attributes
    }

    private static func purchase(_ value: ArraySlice<UInt8>) -> Purchase? {
        guard let fields = attributes(value) else { return nil }
        var purchase = Purchase(
            quantity: 1, productID: "", transactionID: "", purchaseDate: .distantPast, originalTransactionID: "", cancellationDate: nil)
        var seen = Set<Int64>()
        for (type, value) in fields {
            seen.insert(type)
            switch type {
            case 1701: guard let quantity = integer(value) else { return nil }; purchase.quantity = quantity
            case 1702: guard let text = string(value) else { return nil }; purchase.productID = text
            case 1703: guard let text = string(value) else { return nil }; purchase.transactionID = text
            case 1704: guard let date = date(value) else { return nil }; purchase.purchaseDate = date
            case 1705: guard let text = string(value) else { return nil }; purchase.originalTransactionID = text
            case 1708: purchase.expiresDate = date(value)  // empty for what is no subscription
            case 1712: purchase.cancellationDate = date(value)  // empty when not cancelled
            default: break
            }
        }
        guard seen.isSuperset(of: [1702, 1703]) else { return nil }
        if purchase.originalTransactionID.isEmpty { purchase.originalTransactionID = purchase.transactionID }
        return purchase
    }

    /// A UTF8String or IA5String value.
    private static func string(_ value: ArraySlice<UInt8>) -> String? {
        var reader = DERReader(value)
        guard let element = reader.next(), element.tag == 0x0C || element.tag == 0x16 else { return nil }
        return String(validating: element.value, as: UTF8.self)
    }

    private static func integer(_ value: ArraySlice<UInt8>) -> Int64? {
        var reader = DERReader(value)
        guard let element = reader.next(), element.tag == 0x02 else { return nil }
        return DERReader.integer(element.value)
    }

    /// An RFC 3339 date in an IA5String; nil for an empty one.
    private static func date(_ value: ArraySlice<UInt8>) -> Date? {
        guard let text = string(value), !text.isEmpty else { return nil }
        return ReceiptDate.parse(text)
    }

    private static func format(_ date: Date) -> String { date.ISO8601Format() }
}

/// A receipt read locally: its payload and whether its signature chains to the trusted root.
public struct ReceiptInspection: Sendable, Equatable {
    public var receipt: AppReceipt
    /// Nil when the signature verified at the receipt's creation date; otherwise why not.
    public var signatureProblem: String?

    public var isSignatureVerified: Bool { signatureProblem == nil }

    /// Why a receipt could not be read at all.
    public enum Failure: Error, Equatable, CustomStringConvertible {
        case notBase64
        case notSignedData
        case malformedPayload

        public var description: String {
            switch self {
            case .notBase64: "the receipt is not base64"
            case .notSignedData: "the receipt is not PKCS#7 SignedData"
            case .malformedPayload: "the receipt's payload is not Apple's attribute set"
            }
        }
    }

    /// Reads a base64 receipt: the payload first without trust, then the signature and chain
    /// checked against `root` at the receipt's own creation date (Apple's receipt-signing
    /// certificates expire while old receipts stay genuine). Never crashes on garbage.
    public static func inspect(base64 text: String, root: Certificate) -> Result<ReceiptInspection, Failure> {
        guard let bytes = ByteEncoding.decodeBase64(text), !bytes.isEmpty else { return .failure(.notBase64) }
        guard let payload = SignedData.content(of: bytes) else { return .failure(.notSignedData) }
        guard let receipt = AppReceipt.decode(payload: payload) else { return .failure(.malformedPayload) }
        return .success(
            ReceiptInspection(
                receipt: receipt, signatureProblem: SignedData.problem(verifying: bytes, root: root, at: receipt.creationDate)))
    }
}

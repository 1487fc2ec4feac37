/// One purchasable item of the catalogue, as clients see it.
///
/// `size` and `sha256` are computed by the server from the file, never trusted from the catalogue.
public struct Product: Sendable, Equatable, Codable {
    /// The App Store product identifier (the app prices it through StoreKit).
    public var productId: String
    public var title: String
    public var type: ProductType
    /// Bumped by the operator when the content changes, so apps know to fetch it again.
    public var contentVersion: String
    public var contentType: String
    /// Size of the content file in bytes.
    public var size: Int64
    /// Lower-case hex SHA-256 of the content file.
    public var sha256: String
    /// Path of the content file, relative to the content folder; never sent to clients.
    public var file: String
    /// The file's stamp when it was hashed; never sent to clients.
    public var stamp: FileStamp?
    /// For content in a bucket, the store's ETag of the object when it was hashed; never sent
    /// to clients. Delivery refuses an object whose ETag moved since.
    public var objectETag: String?
    /// For content in a bucket, the CRC-32C of the object's bytes, computed with its SHA-256; a
    /// streamed body is checked against it. Never sent to clients.
    public var objectCRC32C: UInt32?
    /// For content in a bucket, the CRC-32C of each `ObjectDigest.blockSize` block of the object;
    /// every block streamed is checked against its own. Never sent to clients.
    public var objectBlockCRC32C: [UInt32]?
    /// For content in a versioned bucket, the version hashed (`x-amz-version-id`), which a
    /// presigned URL names. Never sent to clients.
    public var objectVersionID: String?
    /// Whether the app offers a free sample of this content before purchase: told to Apple
    /// with a consumption answer (`sampleContentProvided`); never sent to clients.
    public var sampleContentProvided: Bool = false

    public init(
        productId: String, title: String, type: ProductType, contentVersion: String,
        contentType: String, size: Int64, sha256: String, file: String, stamp: FileStamp? = nil
    ) {
        self.productId = productId
        self.title = title
        self.type = type
        self.contentVersion = contentVersion
        self.contentType = contentType
        self.size = size
        self.sha256 = sha256
        self.file = file
        self.stamp = stamp
    }

    private enum CodingKeys: String, CodingKey {
        case productId, title, type, contentVersion, size, sha256, contentType
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        self.init(
            productId: try container.decode(String.self, forKey: .productId),
            title: try container.decode(String.self, forKey: .title),
            type: try container.decode(ProductType.self, forKey: .type),
            contentVersion: try container.decode(String.self, forKey: .contentVersion),
            contentType: try container.decode(String.self, forKey: .contentType),
            size: try container.decode(Int64.self, forKey: .size),
            sha256: try container.decode(String.self, forKey: .sha256),
            file: ""
        )
    }

    /// The representation of this product's content, for range and conditional requests.
    public var representation: ContentRepresentation {
        ContentRepresentation(
            path: file, size: size, sha256: sha256, contentType: contentType, stamp: stamp, objectETag: objectETag,
            objectCRC32C: objectCRC32C, objectBlockCRC32C: objectBlockCRC32C, objectVersionID: objectVersionID)
    }
}

/// The App Store's kinds of in-app purchase.
///
/// See https://developer.apple.com/documentation/storekit/product/producttype
public enum ProductType: String, Sendable, Codable, CaseIterable {
    case nonConsumable = "non-consumable"
    case consumable = "consumable"
    case autoRenewable = "auto-renewable"
    case nonRenewing = "non-renewing"
}

/// The rules for an App Store product identifier.
public enum ProductID {
    /// The longest identifier accepted.
    public static let maximumLength = 255

    /// Whether `text` is a well-formed product ID: reverse-DNS characters (letters, digits,
    /// `.`, `-`, `_`), 1 to 255 of them, with no empty label (`a..b`, a leading or trailing dot).
    public static func isValid(_ text: String) -> Bool {
        let bytes = Array(text.utf8)
        guard (1...maximumLength).contains(bytes.count) else { return false }
        guard bytes.first != UInt8(ascii: "."), bytes.last != UInt8(ascii: ".") else { return false }
        var previous: UInt8 = 0
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                break
            case UInt8(ascii: "."):
                if previous == UInt8(ascii: ".") { return false }
            default:
                return false
            }
            previous = byte
        }
        return true
    }
}

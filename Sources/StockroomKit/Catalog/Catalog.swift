import Foundation

/// The catalogue as `GET /v1/catalog` serves it: the product IDs the app asks StoreKit to price.
public struct Catalog: Sendable, Equatable, Codable {
    /// One product on sale.
    public struct Product: Sendable, Equatable, Codable {
        public var productID: String
        public var title: String?
        /// `non-consumable`, `consumable`, `auto-renewable` or `non-renewing`.
        public var type: String?
        public var contentVersion: String?
        public var size: Int64?
        /// Lower-case hex SHA-256 of the content.
        public var sha256: String?
        public var contentType: String?

        /// A product as the app knows it, for a catalogue it holds itself (bundled, say).
        public init(
            productID: String, title: String? = nil, type: String? = nil, contentVersion: String? = nil, size: Int64? = nil,
            sha256: String? = nil,
            contentType: String? = nil
        ) {
            self.productID = productID
            self.title = title
            self.type = type
            self.contentVersion = contentVersion
            self.size = size
            self.sha256 = sha256
            self.contentType = contentType
        }

        enum CodingKeys: String, CodingKey {
            case productID = "productId"
            case title, type, contentVersion, size, sha256, contentType
        }
    }

    public var version: String?
    public var products: [Product]

    /// A catalogue the app holds itself, for `Delivery.Configuration.catalog`.
    public init(version: String? = nil, products: [Product]) {
        self.version = version
        self.products = products
    }

    /// What to hand `Product.products(for:)` (StoreKit 2) or `SKProductsRequest`.
    public var productIDs: Set<String> { Set(products.map(\.productID)) }
}

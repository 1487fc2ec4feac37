import Foundation

/// A validated catalogue: the products in file order, their version, and the JSON bodies of
/// the catalogue endpoints, rendered once per version so a request only copies bytes.
public struct ProductCatalog: Sendable {
    public let products: [Product]
    /// Changes whenever any product field, file size or digest changes.
    public let version: String
    /// The `GET /v1/catalog` body.
    public let body: [UInt8]
    /// The files whose change calls for a reload (products.json and every content file),
    /// by the path that `stat` follows, with their stamps at load time.
    public let watchedFiles: [String: FileStamp]
    /// For content in a bucket: each product's object key and its size and ETag at load time.
    public let watchedObjects: [String: S3Client.Head]
    /// For a catalogue kept in a bucket: its ETag at load time, for `If-None-Match`.
    public let catalogObjectETag: String?
    private let productBodies: [String: [UInt8]]
    private let index: [String: Int]

    public init(
        products: [Product], watchedFiles: [String: FileStamp] = [:], watchedObjects: [String: S3Client.Head] = [:],
        catalogObjectETag: String? = nil
    ) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let productsJSON = try encoder.encode(products)
        let version = String(ByteEncoding.hex(SHA256.hash(Array(productsJSON))).prefix(32))
        var body = Array(#"{"version":""#.utf8) + Array(version.utf8) + Array(#"","products":"#.utf8)
        body += productsJSON
        body.append(UInt8(ascii: "}"))

        var bodies: [String: [UInt8]] = [:]
        var index: [String: Int] = [:]
        for (position, product) in products.enumerated() {
            bodies[product.productId] = Array(try encoder.encode(product))
            index[product.productId] = position
        }
        self.products = products
        self.version = version
        self.body = body
        self.watchedFiles = watchedFiles
        self.watchedObjects = watchedObjects
        self.catalogObjectETag = catalogObjectETag
        self.productBodies = bodies
        self.index = index
    }

    /// The strong ETag of the catalogue endpoints.
    public var etag: String { "\"\(version)\"" }

    public func product(id: String) -> Product? {
        index[id].map { products[$0] }
    }

    /// The `GET /v1/catalog/{productId}` body.
    public func body(ofProduct id: String) -> [UInt8]? {
        productBodies[id]
    }
}

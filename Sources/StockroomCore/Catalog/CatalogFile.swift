import Foundation

/// `products.json` as the operator writes it: entries before validation.
///
/// Every field is optional here so that a missing one is reported by name, per product.
public struct CatalogFile: Codable, Sendable, Equatable {
    public var products: [Entry]

    /// One product as written in `products.json`.
    public struct Entry: Codable, Sendable, Equatable {
        public var productId: String?
        public var title: String?
        public var type: String?
        /// Relative to the content folder.
        public var file: String?
        public var contentType: String?
        public var contentVersion: String?
        /// Whether the app gives a free sample before purchase (told to Apple on refund requests).
        public var sampleContentProvided: Bool?

        public init(
            productId: String?, title: String?, type: String?, file: String?,
            contentType: String?, contentVersion: String?, sampleContentProvided: Bool? = nil
        ) {
            self.sampleContentProvided = sampleContentProvided
            self.productId = productId
            self.title = title
            self.type = type
            self.file = file
            self.contentType = contentType
            self.contentVersion = contentVersion
        }
    }

    public init(products: [Entry]) {
        self.products = products
    }

    /// Decodes `products.json`; a syntax error names its line and column, a wrong field type its path.
    public static func decode(_ bytes: [UInt8]) throws(CatalogError) -> CatalogFile {
        guard JSONNesting.isShallow(bytes) else {
            throw CatalogError(["products.json nests arrays or objects deeper than \(JSONNesting.limit) levels"])
        }
        do {
            return try JSONDecoder().decode(CatalogFile.self, from: Data(bytes))
        } catch let error as DecodingError {
            if let syntax = JSONSyntaxError.find(in: bytes) {
                throw CatalogError(["products.json is not valid JSON at \(syntax)"])
            }
            throw CatalogError(["products.json: \(Self.describe(error))"])
        } catch {
            throw CatalogError(["products.json: \(error)"])
        }
    }

    /// The bytes to write back: pretty, stable, one product per block.
    public func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .withoutEscapingSlashes]
        var data = try encoder.encode(self)
        data.append(UInt8(ascii: "\n"))
        return data
    }

    private static func describe(_ error: DecodingError) -> String {
        func path(_ codingPath: [any CodingKey]) -> String {
            codingPath.map { key in key.intValue.map { "[\($0)]" } ?? ".\(key.stringValue)" }.joined()
                .trimmingCharacters(in: CharacterSet(charactersIn: "."))
        }
        switch error {
        case .typeMismatch(let type, let context):
            return "\(path(context.codingPath)) should be \(type == String.self ? "a string" : "\(type)")"
        case .valueNotFound(_, let context):
            return "\(path(context.codingPath)) is null"
        case .keyNotFound(let key, let context):
            return "\(path(context.codingPath + [key])) is missing"
        case .dataCorrupted(let context):
            return context.debugDescription
        @unknown default:
            return "\(error)"
        }
    }
}

import ArgumentParser
import Foundation
import StockroomKit

/// `stockroom client`: what an app runs (StockroomKit), from a terminal.
struct ClientCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "client",
        abstract: "Run the app's side of the flow (StockroomKit): catalogue, delivery, restore.",
        subcommands: [CatalogSync.self, Deliver.self, Restore.self])

    /// `stockroom client catalog`: the product IDs, revalidated against a copy on disk.
    struct CatalogSync: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "catalog",
            abstract: "Print the catalogue's product IDs; with --cache, keep a copy and revalidate it (304), or use it offline.")

        @OptionGroup var connection: ClientConnection

        @Option(help: "A folder for the catalogue's copy and ETag.")
        var cache: String?

        @Flag(help: "Print the catalogue as JSON.")
        var json = false

        func run() async throws {
            let folder =
                cache.map { URL(fileURLWithPath: $0) }
                ?? FileManager.default.temporaryDirectory.appendingPathComponent("stockroom-catalog-\(UUID().uuidString)")
            defer { if cache == nil { try? FileManager.default.removeItem(at: folder) } }
            let client = CatalogClient(
                server: try connection.url(), cacheFolder: folder, timeout: connection.timeout, trust: try connection.trust())
            do {
                let (catalog, source) = try await client.catalog()
                switch source {
                case .server: ClientOptions.note("catalogue fetched (200)")
                case .notModified: ClientOptions.note("catalogue unchanged (304): the copy is current")
                case .copy(let reason): ClientOptions.note("server out of reach (\(reason)): the copy on disk")
                }
                if json {
                    let encoder = JSONEncoder()
                    encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
                    print(ClientOptions.printableJSON(String(decoding: try encoder.encode(catalog), as: UTF8.self)))
                } else {
                    for product in catalog.products { print(ClientOptions.printable(product.productID)) }
                }
            } catch {
                ClientOptions.note("no catalogue: \(error)")
                throw ExitCode(2)
            }
        }
    }

    /// `stockroom client deliver`: one purchase, delivered as the app delivers it.
    struct Deliver: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Deliver one purchase: stream, check, move into place, acknowledge.",
            discussion: """
                Progress goes to standard error; the outcome is one line (or --json) on standard output.
                Exit 0 only when the file is in place, checked against Repr-Digest and acknowledged
                (safe to finish); 2 when it should be retried later (the journal keeps the date);
                3 when the receipt should be refreshed; 1 otherwise (finish with no content after a
                revocation, or the app's decision). Run it again with the same --journal to resume.
                Content the server redirects to an object store (a 303 or 307 to a presigned URL) is
                fetched there with no token, proof or cookie, checked the same way, and acknowledged
                to the server.
                """)

        @OptionGroup var connection: ClientConnection

        @Option(help: "The product ID bought.")
        var product: String

        @Option(help: "A file holding the StoreKit 2 signed transaction (JWS).")
        var signedTransaction: String?

        @Option(help: "A file holding the app receipt (raw or base64).")
        var receipt: String?

        @Option(help: "A file holding an iOS 6 transaction receipt (raw or base64).")
        var transactionReceipt: String?

        @Option(help: "The transaction ID (read from the JWS when not given; required with a receipt).")
        var transactionId: String?

        @Option(help: "The appAccountToken the purchase was bound to (a UUID).")
        var account: String?

        @Option(help: "The folder the file goes into (as <product ID>).")
        var into: String

        @Option(help: "The journal's folder: keep it between runs to resume.")
        var journal: String

        @Flag(help: "Print the outcome as JSON.")
        var json = false

        func validate() throws {
            if [signedTransaction, receipt, transactionReceipt].compactMap({ $0 }).count != 1 {
                throw ValidationError("Give exactly one of --signed-transaction, --receipt and --transaction-receipt.")
            }
            if signedTransaction == nil, transactionId == nil { throw ValidationError("--transaction-id is required with a receipt.") }
            if let account, UUID(uuidString: account) == nil { throw ValidationError("--account must be a UUID.") }
        }

        func run() async throws {
            let purchase = try makePurchase()
            let delivery = try await connection.delivery(into: into, journal: journal, catalogued: true)
            let progress = ClientOptions.showProgress(delivery, purchase.transactionID)
            let outcome = await delivery.deliver(purchase)
            progress.cancel()
            ClientOptions.print(outcome, productID: purchase.productID, transactionID: purchase.transactionID, json: json)
            throw ExitCode(ClientOptions.status(outcome))
        }

        private func makePurchase() throws -> Purchase {
            let proof: Proof
            var transactionID = transactionId
            var original: String?
            var accountToken = account.flatMap(UUID.init(uuidString:))
            if let signedTransaction {
                let jws = try ClientOptions.text(signedTransaction)
                proof = .signedTransaction(jws)
                let claims = ClientOptions.claims(jws)
                transactionID = transactionID ?? claims?.transactionId
                original = claims?.originalTransactionId
                if accountToken == nil { accountToken = claims?.appAccountToken.flatMap(UUID.init(uuidString:)) }
            } else if let receipt {
                proof = .appReceipt(try ClientOptions.bytes(receipt))
            } else {
                proof = .transactionReceipt(try ClientOptions.bytes(transactionReceipt ?? ""))
            }
            guard let transactionID else { throw ValidationError("No transaction ID: pass --transaction-id.") }
            return Purchase(
                productID: product, transactionID: transactionID, originalTransactionID: original, proof: proof,
                appAccountToken: accountToken)
        }
    }

    /// `stockroom client restore`: every purchase of a customer, through `POST /v1/restores`.
    struct Restore: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Restore every purchase of the customer who made a signed transaction; files already intact are not downloaded.",
            discussion: "One line per product (or --json); exit 0 only when every one is in place, checked and acknowledged.")

        @OptionGroup var connection: ClientConnection

        @Option(help: "A file holding any StoreKit 2 signed transaction of the customer.")
        var signedTransaction: String

        @Option(help: "The folder the files go into (as <product ID>).")
        var into: String

        @Option(help: "The journal's folder: keep it between runs to resume.")
        var journal: String

        @Flag(help: "Print the outcomes as JSON.")
        var json = false

        func run() async throws {
            let delivery = try await connection.delivery(into: into, journal: journal)
            switch await delivery.restore(signedTransaction: try ClientOptions.text(signedTransaction)) {
            case .failure(.transport(let message)):
                ClientOptions.note("the server could not be reached: \(message)")
                throw ExitCode(2)
            case .failure(.refused(let outcome)):
                ClientOptions.print(outcome, productID: nil, transactionID: nil, json: json)
                throw ExitCode(ClientOptions.status(outcome))
            case .success(let restored):
                for purchase in restored {
                    ClientOptions.print(
                        purchase.outcome, productID: purchase.productID, transactionID: purchase.transactionID, json: json,
                        downloaded: purchase.downloaded)
                }
                throw ExitCode(restored.map { ClientOptions.status($0.outcome) }.max() ?? 0)
            }
        }
    }
}

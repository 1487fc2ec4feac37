import ArgumentParser
import Foundation
import StockroomCore
import StockroomEntitlement
import StockroomServer

/// `stockroom refulfil --history TX`: the operator's restore without a receipt.
extension RefulfilCommand {
    func restoreHistory(_ transactionID: String, context: OperatorContext, entitlements: Entitlements) async throws {
        guard TransactionID.isValid(transactionID) else { fail("\(transactionID) is not a transaction ID") }
        let catalogue = await loadCatalogue(context.configuration)
        let progress = json ? nil : FileHandle.standardError
        let decision = try await entitlements.restoreHistory(transactionID, inCatalogue: { catalogue.product(id: $0) != nil }) {
            page, count in
            progress?.write(Data("history page \(page): \(count) transaction\(count == 1 ? "" : "s") so far\n".utf8))
        }
        switch decision {
        case .restored(let report): printReport(report)
        case .refused(.unknownTransaction): fail("the App Store knows no transaction \(transactionID)")
        case .refused(.notConfigured):
            fail("--history needs App Store Server API credentials (--app-store-key, --app-store-key-id, --app-store-issuer-id)")
        case .refused(let refusal): fail("refused: \(refusal)")
        case .unavailable, .limited:
            FileHandle.standardError.write(Data("the App Store could not be asked; nothing was restored\n".utf8))
            throw ExitCode(1)
        }
    }

    private func printReport(_ report: RestoreReport) {
        let skipped = report.skipped
        if json {
            let restored = report.restored.map {
                ["transactionId": $0.fulfilment.transactionID, "productId": $0.fulfilment.productID, "state": $0.fulfilment.state.rawValue]
            }
            let skips = skipped.map { ["transactionId": $0.transactionID, "productId": $0.productID, "reason": $0.reason.rawValue] }
            print(OperatorJSON.string(["restored": restored, "skipped": skips]))
            return
        }
        for purchase in report.restored {
            print(
                "\(purchase.fulfilment.transactionID)  \(purchase.fulfilment.productID)  restored (\(purchase.fulfilment.state.rawValue))")
        }
        for skip in skipped { print("\(skip.transactionID)  \(skip.productID)  skipped: \(skip.reason.rawValue)") }
        let notInCatalogue = report.count(.notInCatalogue)
        let revoked = report.count(.revoked)
        let other = skipped.count - notInCatalogue - revoked
        print(
            """
            restored \(report.restored.count), skipped \(notInCatalogue) not in the catalogue, \(revoked) \
            revoked\(other > 0 ? ", \(other) other" : "")
            """
        )
    }

    private func loadCatalogue(_ configuration: ServerConfiguration) async -> ProductCatalog {
        if configuration.contentFolder.hasPrefix("s3://") {
            do {
                return try await BucketCatalog(configuration).loader.load()
            } catch {
                fail("catalogue: \(error)")
            }
        }
        do {
            let jail = try ContentJail(folder: configuration.contentFolder)
            return try CatalogLoader(
                catalogFolder: configuration.catalogFolder, jail: jail, digests: DigestCache(file: configuration.digestCachePath)
            ).load()
        } catch {
            fail("catalogue: \(error)")
        }
    }
}

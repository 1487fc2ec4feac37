import Foundation
import Logging
import StockroomCore

extension ServerConfiguration {
    /// Every configured webhook endpoint, checked: the file's, then one per `--webhook` URL.
    public func webhookEndpoints(tokenKey: [UInt8]) throws(StartupError) -> [WebhookEndpoint] {
        var file: Data?
        if let path = webhooksFile {
            do { file = try Data(contentsOf: URL(fileURLWithPath: path)) } catch {
                throw .webhooks("the webhooks file \"\(path)\" cannot be read: \(error.localizedDescription)")
            }
        }
        do { return try WebhookEndpoint.resolve(urls: webhookURLs, file: file, key: tokenKey) } catch {
            throw .webhooks(error.description)
        }
    }

    /// The sender of the ledger's events to `endpoints`, when there is any.
    func webhookSender(ledger: any Ledger, endpoints: [WebhookEndpoint], logger: Logger) -> WebhookSender? {
        guard !endpoints.isEmpty else { return nil }
        logger.info("webhooks", metadata: ["endpoints": .string(endpoints.map(\.name).joined(separator: ", "))])
        return WebhookSender(ledger: ledger, endpoints: endpoints, settings: webhookSettings, logger: logger)
    }
}

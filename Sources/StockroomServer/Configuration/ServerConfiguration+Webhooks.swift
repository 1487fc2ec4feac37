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

    /// The sender of the ledger's events to `endpoints`; with none, it only keeps the event log:
    /// marks events older than the give-up window handled (an endpoint added later is sent the
    /// last day, not all the past) and purges old ones.
    func webhookSender(ledger: any Ledger, endpoints: [WebhookEndpoint], logger: Logger) -> WebhookSender {
        if !endpoints.isEmpty {
            logger.info("webhooks", metadata: ["endpoints": .string(endpoints.map(\.name).joined(separator: ", "))])
        }
        return WebhookSender(ledger: ledger, endpoints: endpoints, settings: webhookSettings, logger: logger)
    }
}

import Logging
import ServiceLifecycle
import StockroomCore
import StockroomHTTP

extension ServerConfiguration {
    /// The responder that hands content to nginx, or nil when Stockroom streams it itself.
    func offloadResponder(store: LocalContentStore) -> OffloadResponder? {
        offload.map { OffloadResponder(store: store, offload: $0) }
    }

    /// The listener for nginx's delivery reports when content is offloaded; none otherwise.
    func offloadServices(ledger: any Ledger, catalog: CatalogStore, logger: Logger) -> [any Service] {
        guard let offload else { return [] }
        let recorder = OffloadDeliveryRecorder(ledger: ledger, catalog: catalog, logger: logger)
        return [OffloadReportListener(address: offload.report, recorder: recorder, logger: logger)]
    }
}

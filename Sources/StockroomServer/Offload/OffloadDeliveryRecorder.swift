import Foundation
import Logging
import StockroomCore

/// Turns nginx's report of an offloaded response into the ledger's `recordDelivery`, exactly as
/// a streamed body's end is recorded.
///
/// A report grants nothing: it can only log an attempt on a transaction the ledger already
/// holds, and `delivered` still needs a complete body that reached the file's last byte.
/// Whatever does not add up (unknown transaction or product, another file size, more bytes than
/// the range) is logged and dropped.
struct OffloadDeliveryRecorder: Sendable {
    let ledger: any Ledger
    let catalog: CatalogStore
    let logger: Logger

    /// Records `line`; never throws: a bad report is the sender's problem, not the listener's.
    func record(_ line: DeliveryLogLine) async {
        var metadata: Logger.Metadata = ["transaction": .string(line.transactionID), "status": .stringConvertible(line.status)]
        do {
            guard let row = try await ledger.fulfilment(line.transactionID) else {
                logger.notice("delivery report for an unknown transaction ignored", metadata: metadata)
                return
            }
            guard let product = catalog.catalog.product(id: row.productID) else {
                logger.notice("delivery report for a product no longer in the catalogue ignored", metadata: metadata)
                return
            }
            guard var report = Self.report(for: line, fileSize: product.size) else {
                if line.method != "HEAD" { logger.notice("delivery report that does not match the file ignored", metadata: metadata) }
                return
            }
            report.version = product.representation.etag
            StockroomMetrics.bytesStreamed(report.bytesSent)
            try await ledger.recordDelivery(line.transactionID, report: report, fileSize: product.size, now: Date())
        } catch {
            metadata["error"] = "\(error)"
            logger.error("could not record an offloaded download", metadata: metadata)
        }
    }

    /// The delivery `line` describes for a file of `fileSize` bytes, or nil when there is none
    /// to record: a HEAD, a status other than 200 or 206, a range of another file, or more
    /// bytes than were to be sent. Complete means nginx finished and sent every byte planned.
    static func report(for line: DeliveryLogLine, fileSize: Int64) -> DeliveryReport? {
        guard line.method != "HEAD", fileSize >= 0 else { return nil }
        let range: ClosedRange<Int64>?
        switch line.status {
        case 500...599:
            // nginx could not send the file (it could not read it): Stockroom's side failed.
            return DeliveryReport(range: nil, bytesSent: 0, ending: .server)
        case 200:
            range = fileSize > 0 ? 0...(fileSize - 1) : nil
        case 206:
            guard let sent = line.contentRange, sent.total == fileSize else { return nil }
            range = sent.first...sent.last
        default:
            return nil
        }
        let planned = range.map { $0.upperBound - $0.lowerBound + 1 } ?? 0
        guard line.bytesSent <= planned else { return nil }
        return DeliveryReport(range: range, bytesSent: line.bytesSent, complete: line.completed && line.bytesSent == planned)
    }
}

import ArgumentParser
import Foundation
import Logging
import StockroomCore
import StockroomServer

/// `stockroom receipt verify`: an operator's look at a customer's receipt.
struct ReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Verify an app receipt upstream.",
        subcommands: [Verify.self])

    struct Verify: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Ask the App Store about a base64 receipt and print the verdict.",
            discussion: """
                Exit status: 0 valid, 1 invalid, 2 unavailable (the App Store did not answer usably;
                try again later). With --upstream simulator it asks the simulator built into the
                server on --port (http://127.0.0.1:8080/simulator by default).
                """)

        @Argument(help: "A file holding the base64 receipt, or - for standard input.")
        var file: String

        @OptionGroup var options: ServerOptions

        @Option(help: "Also check that the receipt holds a purchase of this product.")
        var productId: String?

        @Option(help: "Also check that the receipt holds this very transaction.")
        var transactionId: String?

        @Flag(help: "Print the verdict as JSON.")
        var json = false

        func run() async throws {
            let configuration = try options.configuration()
            let data = file == "-" ? FileHandle.standardInput.readDataToEndOfFile() : FileManager.default.contents(atPath: file)
            guard let data else { fail("\(file) cannot be read") }
            let receipt = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard !receipt.isEmpty, ByteEncoding.decodeBase64(receipt) != nil else { fail("\(file) does not hold base64 receipt data") }

            var logger = Logger(label: "stockroom.receipt")
            logger.logLevel = .critical
            let client = VerifyReceiptClient(
                transport: CurlHTTPClient(), endpoints: configuration.upstream.endpoints(simulatorURL: configuration.simulatorURL),
                sharedSecret: configuration.sharedSecret, logger: logger)
            let verifier = AppStoreReceiptVerifier(client: client, bundleID: configuration.bundleID, cacheInterval: .zero)
            let verdict = await verifier.verify(
                VerificationRequest(receiptData: receipt, productID: productId, transactionID: transactionId), freshness: .upstreamOnly)
            print(json ? VerdictReport.json(verdict) : VerdictReport.text(verdict))
            switch verdict {
            case .valid: return
            case .invalid: throw ExitCode(1)
            case .unavailable: throw ExitCode(2)
            }
        }
    }
}

/// Renders a verdict for people or for scripts.
enum VerdictReport {
    static func text(_ verdict: ReceiptVerdict) -> String {
        switch verdict {
        case .valid(let receipt):
            var lines = ["valid: \(receipt.environment.rawValue) receipt for \(receipt.bundleID)"]
            if let matched = receipt.transaction {
                lines.append("matched: transaction \(matched.transactionID), product \(matched.productID)")
            }
            lines.append("transactions (\(receipt.transactions.count)):")
            for transaction in receipt.transactions {
                var line = "  \(transaction.transactionID)  \(transaction.productID)  purchased \(date(transaction.purchaseDate))"
                if transaction.originalTransactionID != transaction.transactionID { line += "  restores \(transaction.originalTransactionID)" }
                if let cancelled = transaction.cancellationDate { line += "  REFUNDED \(date(cancelled))" }
                lines.append(line)
            }
            return lines.joined(separator: "\n")
        case .invalid(let reason):
            return "invalid (\(reason.code)): \(reason)"
        case .unavailable(let reason, let retryAfter):
            return "unavailable: \(reason); retry after \(retryAfter.components.seconds) s"
        }
    }

    static func json(_ verdict: ReceiptVerdict) -> String {
        var object: [String: Any]
        switch verdict {
        case .valid(let receipt):
            object = [
                "verdict": "valid", "environment": receipt.environment.rawValue, "bundleId": receipt.bundleID,
                "transactions": receipt.transactions.map(transaction),
            ]
            if let matched = receipt.transaction { object["transaction"] = transaction(matched) }
        case .invalid(let reason):
            object = ["verdict": "invalid", "code": reason.code, "reason": reason.description]
        case .unavailable(let reason, let retryAfter):
            object = ["verdict": "unavailable", "reason": reason, "retryAfterSeconds": retryAfter.components.seconds]
        }
        let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }

    private static func transaction(_ transaction: ReceiptTransaction) -> [String: Any] {
        var object: [String: Any] = [
            "transactionId": transaction.transactionID, "originalTransactionId": transaction.originalTransactionID,
            "productId": transaction.productID, "purchaseDate": date(transaction.purchaseDate),
        ]
        if let cancelled = transaction.cancellationDate { object["cancellationDate"] = date(cancelled) }
        return object
    }

    private static func date(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).ISO8601Format()
    }
}

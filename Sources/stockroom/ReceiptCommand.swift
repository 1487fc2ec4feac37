import ArgumentParser
import Foundation
import Logging
import StockroomCore
import StockroomServer

/// `stockroom receipt verify`: an operator's look at a customer's receipt.
struct ReceiptCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipt",
        abstract: "Verify a receipt upstream, or read one locally.",
        subcommands: [Verify.self, Inspect.self])

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
            let receipt = readArgumentFile(file)
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

extension ReceiptCommand {
    /// `stockroom receipt inspect`: read a receipt locally, without asking Apple.
    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract:
                """
                Read a base64 receipt locally: an app receipt's bundle, creation date, purchases and signature chain, or an iOS 6 \
                transaction receipt's fields.
                """,
            discussion: """
                An app receipt's chain is checked against Apple Inc. Root Certificate unless --root names
                another PEM (the simulator publishes its own at /sim/root.pem), at the receipt's creation
                date; exit status 0 when it reads and verifies, 1 otherwise. A transaction receipt
                (SKPaymentTransaction.transactionReceipt) is shown but cannot be verified locally: only
                the App Store verifies it (receipt verify); exit status 0 when it reads. Apple's
                answer stays the verdict on the purchase.
                """)

        @Argument(help: "A file holding the base64 receipt, or - for standard input.")
        var file: String

        @Option(help: "The trusted root certificate (PEM); default Apple Inc. Root.")
        var root: String?

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            let text = readArgumentFile(file)
            let trusted = loadRootCertificate(root, fallback: AppleRootCertificates.incRoot)
            let inspection: ReceiptInspection
            switch ReceiptInspection.inspect(base64: text, root: trusted) {
            case .success(let read): inspection = read
            case .failure(let failure):
                if failure != .notBase64, let receipt = TransactionReceipt.parse(base64: text) {
                    print(TransactionReceiptReport.render(receipt, json: json))
                    return
                }
                print(json ? OperatorJSON.string(UnreadableReceipt(reason: failure.description)) : "unreadable: \(failure)")
                throw ExitCode(1)
            }
            let receipt = inspection.receipt
            let purchases = receipt.purchases.map { purchase in
                InspectedReceipt.Purchase(
                    transactionId: purchase.transactionID, originalTransactionId: purchase.originalTransactionID,
                    productId: purchase.productID,
                    quantity: purchase.quantity, purchaseDate: OperatorJSON.date(purchase.purchaseDate),
                    cancellationDate: purchase.cancellationDate.map(OperatorJSON.date),
                    expiresDate: purchase.expiresDate.map(OperatorJSON.date))
            }
            if json {
                print(
                    OperatorJSON.string(
                        InspectedReceipt(
                            signatureVerified: inspection.isSignatureVerified, bundleId: receipt.bundleID, appVersion: receipt.appVersion,
                            creationDate: OperatorJSON.date(receipt.creationDate), purchases: purchases, receiptType: receipt.receiptType,
                            signatureProblem: inspection.signatureProblem)))
            } else {
                print(
                    inspection.isSignatureVerified
                        ? "signature: verified, chained to \(trusted.subject) at the creation date"
                        : "signature: NOT verified against \(trusted.subject): \(inspection.signatureProblem ?? "")")
                print("bundle: \(receipt.bundleID)  version: \(receipt.appVersion)  type: \(receipt.receiptType ?? "-")")
                print("created: \(OperatorJSON.date(receipt.creationDate))")
                print("in-app purchases (\(purchases.count)):")
                for purchase in receipt.purchases {
                    var line = "  \(purchase.transactionID)  \(purchase.productID)  purchased \(OperatorJSON.date(purchase.purchaseDate))"
                    if purchase.originalTransactionID != purchase.transactionID { line += "  restores \(purchase.originalTransactionID)" }
                    if let cancelled = purchase.cancellationDate { line += "  CANCELLED \(OperatorJSON.date(cancelled))" }
                    print(line)
                }
            }
            if !inspection.isSignatureVerified { throw ExitCode(1) }
        }
    }
}

/// Renders an iOS 6 transaction receipt read locally: claims only, never a verdict.
enum TransactionReceiptReport {
    static func render(_ receipt: TransactionReceipt, json: Bool) -> String {
        let purchase = receipt.purchase
        let fields: [(String, String?)] = [
            ("transactionId", purchase.transactionID), ("originalTransactionId", purchase.originalTransactionID),
            ("productId", purchase.productID), ("bundleId", purchase.bundleID), ("bundleVersion", purchase.bundleVersion),
            ("purchaseDate", purchase.purchaseDate.map { OperatorJSON.date(Milliseconds.date($0)) }),
            ("expiresDate", purchase.expiresDate.map { OperatorJSON.date(Milliseconds.date($0)) }),
            ("quantity", purchase.quantity), ("itemId", purchase.itemID), ("uniqueIdentifier", purchase.uniqueIdentifier),
            ("environment", receipt.claimedEnvironment.rawValue), ("signingStatus", receipt.signingStatus),
        ]
        let note = "a transaction receipt: verified only by the App Store (run receipt verify), nothing here is checked"
        if json {
            var object = ["kind": ReceiptKind.transactionReceipt.rawValue, "note": note]
            for case (let key, let value?) in fields { object[key] = value }
            return OperatorJSON.string(ReadTransactionReceipt(fields: object))
        }
        var lines = ["kind: transaction receipt (iOS 6 SKPaymentTransaction.transactionReceipt)", "signature: \(note)"]
        for case (let key, let value?) in fields { lines.append("\(key): \(value)") }
        return lines.joined(separator: "\n")
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
                if transaction.originalTransactionID != transaction.transactionID {
                    line += "  restores \(transaction.originalTransactionID)"
                }
                if let cancelled = transaction.cancellationDate { line += "  REFUNDED \(date(cancelled))" }
                if let expires = transaction.expiresDate { line += "  expires \(date(expires))" }
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
        var report: Report
        switch verdict {
        case .valid(let receipt):
            report = Report(verdict: "valid")
            report.environment = receipt.environment.rawValue
            report.bundleId = receipt.bundleID
            report.transactions = receipt.transactions.map(transaction)
            report.transaction = receipt.transaction.map(transaction)
        case .invalid(let reason):
            report = Report(verdict: "invalid")
            report.code = reason.code
            report.reason = reason.description
        case .unavailable(let reason, let retryAfter):
            report = Report(verdict: "unavailable")
            report.reason = reason
            report.retryAfterSeconds = retryAfter.components.seconds
        }
        return OperatorJSON.string(report)
    }

    /// `receipt verify --json`. Names are the JSON keys.
    struct Report: Encodable {
        var verdict: String
        var environment: String?
        var bundleId: String?
        var transactions: [Transaction]?
        var transaction: Transaction?
        var code: String?
        var reason: String?
        var retryAfterSeconds: Int64?
    }

    struct Transaction: Encodable {
        var transactionId: String
        var originalTransactionId: String
        var productId: String
        var purchaseDate: String
        var cancellationDate: String?
        var expiresDate: String?
    }

    private static func transaction(_ transaction: ReceiptTransaction) -> Transaction {
        Transaction(
            transactionId: transaction.transactionID, originalTransactionId: transaction.originalTransactionID,
            productId: transaction.productID,
            purchaseDate: date(transaction.purchaseDate), cancellationDate: transaction.cancellationDate.map(date),
            expiresDate: transaction.expiresDate.map(date))
    }

    private static func date(_ milliseconds: Int64) -> String {
        Date(timeIntervalSince1970: Double(milliseconds) / 1000).ISO8601Format()
    }
}

/// `receipt inspect --json` for an app receipt. Names are the JSON keys.
struct InspectedReceipt: Encodable {
    var readable = true
    var signatureVerified: Bool
    var bundleId: String
    var appVersion: String
    var creationDate: String
    var purchases: [Purchase]
    var receiptType: String?
    var signatureProblem: String?

    struct Purchase: Encodable {
        var transactionId: String
        var originalTransactionId: String
        var productId: String
        var quantity: Int64
        var purchaseDate: String
        var cancellationDate: String?
        var expiresDate: String?
    }
}

/// `receipt inspect --json` for what cannot be read.
struct UnreadableReceipt: Encodable {
    var readable = false
    var reason: String
}

/// `receipt inspect --json` for an iOS 6 transaction receipt: its claims, all text, never verified.
struct ReadTransactionReceipt: Encodable {
    var fields: [String: String]

    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: Key.self)
        try container.encode(true, forKey: Key(stringValue: "readable"))
        try container.encode(false, forKey: Key(stringValue: "signatureVerified"))
        for (key, value) in fields { try container.encode(value, forKey: Key(stringValue: key)) }
    }
}

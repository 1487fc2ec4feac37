import ArgumentParser
import Foundation
import StockroomCore

/// `stockroom transaction inspect`: is this StoreKit 2 signed transaction genuine, and what does it say?
struct TransactionCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "transaction",
        abstract: "Inspect a StoreKit 2 signed transaction (JWS).",
        subcommands: [Inspect.self])

    struct Inspect: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Verify a signed transaction locally and print it; exit 0 only when it verifies.",
            discussion: """
                The chain must lead to the root: Apple Root CA - G3 unless --root names another PEM
                (the simulator publishes its own at /sim/root.pem). Validity is judged at the
                transaction's signedDate.
                """)

        @Argument(help: "A file holding the JWS, or - for standard input.")
        var file: String

        @Option(help: "The trusted root certificate (PEM); default Apple Root CA - G3.")
        var root: String?

        @Option(help: "The bundle ID the transaction must carry (STOCKROOM_BUNDLE_ID; default com.example.stockroom.demo).")
        var bundleId: String?

        @Option(help: "Production or Sandbox: the environment it must come from (default either).")
        var environment: String?

        @Flag(help: "Print JSON.")
        var json = false

        func run() async throws {
            let jws = readArgumentFile(file)
            let trusted = loadRootCertificate(root, fallback: AppleRootCertificates.rootCAG3)
            var expected: StoreEnvironment?
            if let environment {
                guard let parsed = StoreEnvironment(rawValue: environment) else {
                    throw ValidationError("environment must be Production or Sandbox")
                }
                expected = parsed
            }
            let bundle = bundleId ?? ProcessInfo.processInfo.environment["STOCKROOM_BUNDLE_ID"] ?? "com.example.stockroom.demo"
            let verifier = SignedTransactionVerifier(root: trusted, bundleID: bundle, environment: expected)
            switch verifier.verify(jws) {
            case .success(let transaction):
                let date = { (milliseconds: Int64) in OperatorJSON.date(Milliseconds.date(milliseconds)) }
                let report = VerifiedTransactionReport(
                    transactionId: transaction.transactionId, originalTransactionId: transaction.originalTransactionId,
                    productId: transaction.productId, bundleId: transaction.bundleId, environment: transaction.environment.rawValue,
                    type: transaction.type,
                    purchaseDate: date(transaction.purchaseDate), signedDate: date(transaction.signedDate),
                    revocationDate: transaction.revocationDate.map(date), appAccountToken: transaction.appAccountToken,
                    revocationReason: transaction.revocationReason, expiresDate: transaction.expiresDate.map(date))
                if json {
                    print(OperatorJSON.string(report))
                } else {
                    print("valid: signed by a chain to \(trusted.subject)")
                    for line in TextFields.lines(report, skipping: ["verdict"]) { print("  \(line)") }
                    if transaction.isRevoked { print("REVOKED: this purchase was refunded or revoked") }
                    if transaction.isExpired(at: Date()) { print("EXPIRED: this subscription has ended") }
                }
            case .failure(let failure):
                print(
                    json
                        ? OperatorJSON.string(["verdict": "invalid", "code": failure.code, "reason": failure.description])
                        : "invalid (\(failure.code)): \(failure)")
                throw ExitCode(1)
            }
        }
    }
}

/// `transaction verify --json` for a signed transaction that verified. Names are the JSON keys.
struct VerifiedTransactionReport: Encodable {
    var verdict = "valid"
    var transactionId: String
    var originalTransactionId: String
    var productId: String
    var bundleId: String
    var environment: String
    var type: String?
    var purchaseDate: String
    var signedDate: String
    var revocationDate: String?
    var appAccountToken: String?
    var revocationReason: Int?
    var expiresDate: String?
}

import ArgumentParser
import Foundation
import StockroomServer

/// `stockroom doctor`: checks a deployment with `serve`'s flags before it serves.
struct DoctorCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "doctor",
        abstract: "Check a deployment before it serves: upstream, roots, key, secrets, ledger, catalogue, clock, disk.",
        discussion: """
            Takes the same flags and STOCKROOM_* variables as serve, and checks, one line each: \
            the catalogue loads (every file hashed); the trust roots are present and parse; the \
            Server API key file is readable and a P-256 key; a shared secret is set when the \
            catalogue sells auto-renewable subscriptions (Apple needs it to verify their \
            receipts); the ledger can be written (nothing is created or changed) and at least 100 \
            MiB are free beside it, or, for a postgres:// ledger, the database answers; the upstream's verifyReceipt answers; and \
            this machine's clock is within 60 s of the upstream's Date header.

            Exits 0 when every check passes, 1 when any fails.
            """
    )

    @OptionGroup var options: ServerOptions
    @OptionGroup(title: "Limits") var limits: LimitOptions

    func run() async throws {
        // The roots are checked one by one below, each named: the configuration is read without them.
        var environment = ProcessInfo.processInfo.environment
        let given = options.upstreamOptions.trustRoots
        let rootFiles = given.isEmpty ? (environment["STOCKROOM_TRUST_ROOT"] ?? "").split(separator: ":").map(String.init) : given
        environment["STOCKROOM_TRUST_ROOT"] = nil
        var withoutRoots = options
        withoutRoots.upstreamOptions.trustRoots = []
        var configuration: ServerConfiguration
        do {
            configuration = try withoutRoots.configuration(environment: environment)
            try limits.apply(to: &configuration, environment: environment)
        } catch {
            print("FAIL configuration: \(error)")
            throw ExitCode(1)
        }
        let findings = await Doctor(configuration: configuration, trustRootFiles: rootFiles).run()
        for finding in findings { print(finding) }
        let failed = findings.filter { !$0.passed }.count
        print(failed == 0 ? "all \(findings.count) checks passed" : "\(failed) of \(findings.count) checks failed")
        if failed > 0 { throw ExitCode(1) }
    }
}

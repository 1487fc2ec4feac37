import Foundation
import Hummingbird
import StockroomCore

/// `make bench` only, never shipped:
/// - `StockroomBench verify SIMULATOR_URL COUNT` times receipt verifications against a running
///   simulator: p50/p99 and upstream calls per verification;
/// - `StockroomBench signatures COUNT` measures JWS and receipt verifications per second;
/// - `StockroomBench decisions COUNT` times the one-transaction entitlement decision on SQLite;
/// - `StockroomBench downloads SERVER_URL SIMULATOR_URL PRODUCT COUNT CONCURRENCY [receipt|jws]`
///   measures verified downloads per second, each carrying an app receipt (the default) or a
///   StoreKit 2 signed transaction.
@main
struct StockroomBench {
    static func main() async {
        do {
            try await run(Array(CommandLine.arguments.dropFirst()))
        } catch {
            // Said, and a failed exit: an error out of main traps (signal 4), which says nothing.
            FileHandle.standardError.write(Data("StockroomBench: \(error)\n".utf8))
            exit(1)
        }
    }

    static func run(_ arguments: [String]) async throws {
        switch (arguments.first, arguments.count) {
        case ("verify", 3):
            guard let count = Int(arguments[2]), count > 0 else { usage() }
            try await VerificationBench(simulatorURL: arguments[1], count: count).run()
        case ("signatures", 2):
            guard let count = Int(arguments[1]), count > 0 else { usage() }
            try await SignatureBench(count: count).run()
        case ("decisions", 2):
            guard let count = Int(arguments[1]), count > 0 else { usage() }
            try await DecisionBench(count: count).run()
        case ("downloads", 6), ("downloads", 7):
            guard let count = Int(arguments[4]), let concurrency = Int(arguments[5]), count > 0, concurrency > 0,
                let proof = DownloadBench.Proof(rawValue: arguments.count == 7 ? arguments[6] : "receipt")
            else { usage() }
            try await DownloadBench(
                serverURL: arguments[1], simulatorURL: arguments[2], productID: arguments[3], count: count, concurrency: concurrency,
                proof: proof
            ).run()
        default:
            usage()
        }
    }

    static func usage() -> Never {
        FileHandle.standardError.write(
            Data(
                """
                usage: StockroomBench verify SIMULATOR_URL COUNT | signatures COUNT | decisions COUNT | downloads SERVER_URL \
                SIMULATOR_URL PRODUCT COUNT CONCURRENCY [receipt|jws]\n
                """
                .utf8))
        exit(2)
    }
}

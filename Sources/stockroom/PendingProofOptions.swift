import ArgumentParser
import Foundation
import StockroomServer

/// The bounds on proofs kept while the App Store cannot be asked (`serve`), each also read
/// from `STOCKROOM_<NAME>`; operator commands read the variables only (`refulfil --pending`
/// purges rejected proofs past the same retention).
struct PendingProofOptions: ParsableArguments {
    private static let defaults = StockroomServer.ServerConfiguration()

    @Option(
        help: ArgumentHelp(
            """
            Unverified proofs kept in all during App Store outages, every status counted; past it, none is kept \
            (STOCKROOM_MAX_PENDING_PROOFS; default \(PendingProofOptions.defaults.maxPendingProofs)).
            """,
            valueName: "count"))
    var maxPendingProofs: Int?

    @Option(
        help: ArgumentHelp(
            """
            Unverified proofs kept from one client address, every status counted (STOCKROOM_MAX_PENDING_PROOFS_PER_CLIENT; default \
            \(PendingProofOptions.defaults.maxPendingProofsPerClient)).
            """,
            valueName: "count"))
    var maxPendingProofsPerClient: Int?

    @Option(
        help: ArgumentHelp(
            """
            The longest unverified proof kept, in bytes (STOCKROOM_MAX_PENDING_PROOF_SIZE; default \
            \(PendingProofOptions.defaults.maxPendingProofSize)).
            """,
            valueName: "bytes"))
    var maxPendingProofSize: Int?

    @Option(
        help: ArgumentHelp(
            """
            How long a proof the App Store rejected stays before it is purged (STOCKROOM_REJECTED_PROOF_RETENTION; default \
            \(DurationArgument.format(PendingProofOptions.defaults.rejectedProofRetention))).
            """,
            valueName: "duration"))
    var rejectedProofRetention: String?

    /// Sets the bounds given by flag or variable; a malformed one is a usage error naming the flag.
    func apply(
        to configuration: inout StockroomServer.ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        try Self.apply(
            to: &configuration,
            flags: [
                maxPendingProofs.map(String.init), maxPendingProofsPerClient.map(String.init), maxPendingProofSize.map(String.init),
                rejectedProofRetention,
            ],
            environment: environment)
    }

    /// The variables alone, for operator commands.
    static func applyEnvironment(
        to configuration: inout StockroomServer.ServerConfiguration, environment: [String: String] = ProcessInfo.processInfo.environment
    ) throws {
        try apply(to: &configuration, flags: [nil, nil, nil, nil], environment: environment)
    }

    private static func apply(to configuration: inout StockroomServer.ServerConfiguration, flags: [String?], environment: [String: String])
        throws
    {
        func value(_ index: Int, _ name: String) -> String? { flags[index] ?? environment["STOCKROOM_\(name)"] }
        func count(_ index: Int, _ name: String, _ option: String, _ range: ClosedRange<Int>) throws -> Int? {
            guard let text = value(index, name) else { return nil }
            guard let count = Int(text), range.contains(count) else {
                throw ValidationError("--\(option) must be a number from \(range.lowerBound) to \(range.upperBound), not \"\(text)\"")
            }
            return count
        }
        if let total = try count(0, "MAX_PENDING_PROOFS", "max-pending-proofs", 1...10_000_000) { configuration.maxPendingProofs = total }
        if let share = try count(1, "MAX_PENDING_PROOFS_PER_CLIENT", "max-pending-proofs-per-client", 1...1_000_000) {
            configuration.maxPendingProofsPerClient = share
        }
        if let size = try count(2, "MAX_PENDING_PROOF_SIZE", "max-pending-proof-size", 1024...(1 << 20)) {
            configuration.maxPendingProofSize = size
        }
        if let text = value(3, "REJECTED_PROOF_RETENTION") {
            do {
                configuration.rejectedProofRetention = try DurationArgument.parse(text)
            } catch {
                throw ValidationError("--rejected-proof-retention: \(error)")
            }
        }
    }
}

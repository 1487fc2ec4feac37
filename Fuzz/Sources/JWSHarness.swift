import Foundation
import StockroomCore

/// StoreKit 2 signed transactions: the JWS as received (forged, truncated, garbage), or a payload
/// signed by the trusted chain so the transaction decoder behind the signature is fuzzed too.
enum JWSHarness {
    static func run(_ input: [UInt8]) {
        let jws = FuzzFixtures.jws(from: input)
        let raw = FuzzFixtures.transactions.jws.verify(jws)
        let transaction = FuzzFixtures.transactions.verify(jws)
        // A transaction that verifies must have verified as a JWS first.
        if case .success = transaction, case .failure(let failure) = raw {
            fatalError("a transaction verified although its JWS did not: \(failure)")
        }
    }
}

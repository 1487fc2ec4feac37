import Foundation
import StockroomCore

/// StoreKit 2 signed transactions: the JWS as received (forged, truncated, garbage), or a payload
/// signed by the trusted chain so the transaction decoder behind the signature is fuzzed too.
enum JWSHarness {
    static func run(_ input: [UInt8]) {
        let jws = FuzzFixtures.jws(from: input)
        let transaction = FuzzFixtures.transactions.verify(jws, as: SignedTransaction.self)
        // A transaction that verifies is the JWS that was given, with the app's bundle.
        if case .success(let verified) = transaction, verified.jws != jws || verified.payload.bundleId != FuzzFixtures.bundleID {
            fatalError("a transaction verified as another JWS or for another app: \(verified)")
        }
    }
}

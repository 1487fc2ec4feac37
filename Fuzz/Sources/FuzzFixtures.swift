import Foundation
import StockroomCore

/// What every harness shares, made once per process: a signing chain like the simulator's (the
/// trusted root, and a signer so inputs can reach the code behind a valid signature), and the bundle.
enum FuzzFixtures {
    static let bundleID = "com.example.stockroom.demo"

    static let chain: FuzzSigningChain = {
        do {
            return try FuzzSigningChain()
        } catch {
            fatalError("the fuzz signing chain could not be made: \(error)")
        }
    }()

    static let transactions = SignedTransactionVerifier(root: chain.root, bundleID: bundleID, environment: nil)

    /// Inputs whose first byte is `S` ask the harness to sign the rest with this chain.
    static let signMarker = UInt8(ascii: "S")

    /// A compact JWS from `input`: the rest signed when it starts with `S`, else the text as is.
    static func jws(from input: [UInt8]) -> String {
        if input.first == signMarker, let signed = try? chain.sign(payload: Array(input.dropFirst())) { return signed }
        return String(decoding: input, as: UTF8.self)
    }

    /// Runs async code to completion from libFuzzer's synchronous callback.
    static func wait<Value: Sendable>(_ operation: @escaping @Sendable () async -> Value) -> Value {
        let rendezvous = Rendezvous<Value>()
        Task { rendezvous.put(await operation()) }
        return rendezvous.take()
    }
}

/// One value handed from a task to a waiting thread; the semaphore orders the write before the read.
private final class Rendezvous<Value: Sendable>: @unchecked Sendable {
    private var value: Value?
    private let done = DispatchSemaphore(value: 0)

    func put(_ value: Value) {
        self.value = value
        done.signal()
    }

    func take() -> Value {
        done.wait()
        guard let value else { fatalError("a rendezvous was signalled without a value") }
        return value
    }
}

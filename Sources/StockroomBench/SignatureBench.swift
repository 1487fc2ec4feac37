import AppStoreSimulator
import Foundation
import StockroomCore

/// StoreKit 2 JWS verifications per second (chain to the root, OIDs, ES256) and local receipt
/// reads per second (PKCS#7 + chain at the creation date), and the unverified read every
/// download makes first (`ReceiptProof.parse`), with one task and with two.
struct SignatureBench {
    let count: Int

    func run() async throws {
        let chain = try SigningChain()
        let payload = try JSONSerialization.data(withJSONObject: [
            "transactionId": "2000000000000001", "originalTransactionId": "2000000000000001",
            "productId": "com.example.stockroom.demo.book1",
            "bundleId": "com.example.stockroom.demo", "purchaseDate": 1_790_000_000_000, "environment": "Production",
            "signedDate": Date().timeIntervalSince1970 * 1000,
        ])
        let jws = try chain.sign(payload: Array(payload))
        // Cold: every chain verified afresh. Warm: the chain kept after its first verification, as
        // the server keeps Apple's (the dates and the signature are still checked each time).
        let cold = SignedTransactionVerifier(root: chain.root, bundleID: "com.example.stockroom.demo", environment: nil, chains: nil)
        let warm = SignedTransactionVerifier(root: chain.root, bundleID: "com.example.stockroom.demo", environment: nil)
        let receipt = AppReceipt(
            receiptType: "Production", bundleID: "com.example.stockroom.demo", appVersion: "1", opaqueValue: Array("device".utf8),
            creationDate: Date(timeIntervalSince1970: floor(Date().timeIntervalSince1970)),
            purchases: [
                .init(
                    quantity: 1, productID: "com.example.stockroom.demo.book1", transactionID: "2000000000000001", purchaseDate: Date(),
                    originalTransactionID: "2000000000000001", cancellationDate: nil)
            ])
        let receiptData = ByteEncoding.base64(try chain.signReceipt(payload: receipt.encodedPayload()))
        let root = chain.root

        for tasks in [1, 2] {
            let jwsRate = try await rate(tasks: tasks) {
                guard case .success = cold.verify(jws) else { throw BenchError("a JWS did not verify") }
            }
            let warmRate = try await rate(tasks: tasks) {
                guard case .success = warm.verify(jws) else { throw BenchError("a JWS did not verify") }
            }
            let receiptRate = try await rate(tasks: tasks) {
                guard case .success(let inspection) = ReceiptInspection.inspect(base64: receiptData, root: root),
                    inspection.isSignatureVerified
                else {
                    throw BenchError("a receipt did not verify")
                }
            }
            let proofRate = try await rate(tasks: tasks) {
                guard ReceiptProof.parse(receiptData) != nil else { throw BenchError("a receipt was not read") }
            }
            print(
                "\(tasks) task\(tasks == 1 ? "" : "s"): \(jwsRate) JWS verifications/s cold (every chain verified), \(warmRate)/s warm "
                    + "(chain cache; aim 10,000/s), \(receiptRate) receipt verifications/s, "
                    + "\(proofRate) local receipt reads/s (a download's ReceiptProof.parse)")
        }
    }

    private func rate(tasks: Int, _ operation: @escaping @Sendable () throws -> Void) async throws -> Int {
        let perTask = count / tasks
        let start = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<tasks {
                group.addTask { for _ in 0..<perTask { try operation() } }
            }
            try await group.waitForAll()
        }
        let elapsed = ContinuousClock.now - start
        return Int(Double(perTask * tasks) / (Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18))
    }
}

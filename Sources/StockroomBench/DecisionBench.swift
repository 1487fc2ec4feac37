import AppStoreSimulator
import Foundation
import StockroomCore
import StockroomSQLite

/// The cost of the one-transaction entitlement decision on a SQLite ledger in WAL mode: a first
/// claim (insert), a repeated claim of the same proof (re-read and update), the outage path (the
/// proof on record served) and a resume, each one write transaction that re-reads the purchase.
struct DecisionBench {
    let count: Int

    func run() async throws {
        let folder = NSTemporaryDirectory() + "stockroom-decision-bench-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let ledger = SQLiteLedger(database: try SQLiteDatabase(path: folder + "/ledger.sqlite"))
        let chain = try SigningChain()
        let verifier = SignedTransactionVerifier(root: chain.root, bundleID: "com.example.stockroom.demo", environment: nil)
        let product = "com.example.stockroom.demo.book1"
        var proofs: [VerifiedProof] = []
        for index in 0..<count {
            let id = String(3_000_000_000_000_000 + index)
            let payload = try JSONSerialization.data(withJSONObject: [
                "transactionId": id, "originalTransactionId": id, "productId": product, "bundleId": "com.example.stockroom.demo",
                "purchaseDate": 1_790_000_000_000, "environment": "Production", "signedDate": Date().timeIntervalSince1970 * 1000,
            ])
            proofs.append(try VerifiedProof.verifying(try chain.sign(payload: Array(payload)), with: verifier).get())
        }
        let terms = ProofTerms(requestedProductID: product, appAccountToken: nil, checksAccount: true, countsAttempt: true)
        let now = Date()
        try await measure("first claim (insert)") { index in
            guard case .entitled = try await ledger.recordProof(proofs[index], terms: terms, now: now) else {
                throw BenchError("a claim was refused")
            }
        }
        try await measure("repeated claim (re-read, update)") { index in
            guard case .entitled = try await ledger.recordProof(proofs[index], terms: terms, now: now) else {
                throw BenchError("a claim was refused")
            }
        }
        try await measure("proof on record (outage path)") { index in
            let request = RecordedProofRequest(
                transactionID: proofs[index].transactionID, digest: proofs[index].digest, productID: product, appAccountToken: nil)
            guard try await ledger.serveRecordedProof(request, now: now) != nil else { throw BenchError("a proof on record was refused") }
        }
        try await measure("resume by token") { index in
            guard case .entitled = try await ledger.resume(proofs[index].transactionID, productID: product, now: now) else {
                throw BenchError("a resume was refused")
            }
        }
    }

    private func measure(_ name: String, _ decision: (Int) async throws -> Void) async throws {
        var samples: [Duration] = []
        samples.reserveCapacity(count)
        let start = ContinuousClock.now
        for index in 0..<count {
            let before = ContinuousClock.now
            try await decision(index)
            samples.append(ContinuousClock.now - before)
        }
        let elapsed = ContinuousClock.now - start
        samples.sort()
        func micros(_ duration: Duration) -> Int { Int(duration / .microseconds(1)) }
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        print(
            """
            \(name): \(Int(Double(count) / seconds)) decisions/s, p50 \(micros(samples[count / 2])) µs, p99 \
            \(micros(samples[count * 99 / 100])) µs
            """
        )
    }
}

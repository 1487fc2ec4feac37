import Foundation
import StockroomCore

/// Seeds that need the fuzz signing chain (signed JWS, PKCS#7 receipts), written at fuzz
/// time instead of committed: a fresh chain signs them, and the harnesses trust that same chain.
/// The small hand-written seeds live in `Fuzz/corpus/<target>/`.
enum SeedWriter {
    static let transaction = """
        {"transactionId":"2000000000000001","originalTransactionId":"2000000000000001","productId":"com.example.stockroom.demo.book1",\
        "bundleId":"com.example.stockroom.demo","purchaseDate":1790000000000.5,"type":"Non-Consumable","environment":"Production",\
        "signedDate":1790000000000,"revocationDate":1790000100000,"revocationReason":0,\
        "appAccountToken":"8F2E6A4C-0000-4000-8000-000000000001"}
        """
    static let notification = """
        {"notificationType":"REFUND","subtype":"","notificationUUID":"5f2c0000-0000-4000-8000-000000000001","signedDate":1790000000000,\
        "data":{"bundleId":"com.example.stockroom.demo","environment":"Production"}}
        """

    /// An app receipt's payload with one purchase of book1.
    static func receiptPayload() -> [UInt8] {
        AppReceipt(
            receiptType: "ProductionSandbox", bundleID: FuzzFixtures.bundleID, appVersion: "1.0", opaqueValue: [1, 2, 3, 4],
            creationDate: Date(timeIntervalSince1970: 1_790_000_000),
            purchases: [
                .init(
                    quantity: 1, productID: "com.example.stockroom.demo.book1", transactionID: "1000000000000001",
                    purchaseDate: Date(timeIntervalSince1970: 1_789_000_000), originalTransactionID: "1000000000000001",
                    cancellationDate: nil)
            ]
        ).encodedPayload()
    }

    /// An iOS 6 transaction receipt for book1, in Apple's property-list layout.
    static func transactionReceipt() -> [UInt8] {
        let info = TransactionReceipt.write([
            ("original-purchase-date-ms", "1789000000000"), ("original-transaction-id", "1000000000000002"),
            ("bid", FuzzFixtures.bundleID), ("product-id", "com.example.stockroom.demo.book1"),
            ("transaction-id", "1000000000000002"), ("quantity", "1"), ("purchase-date-ms", "1789000000000"),
        ])
        return TransactionReceipt.write([
            ("signature", ByteEncoding.base64([UInt8](repeating: 7, count: 128))), ("purchase-info", ByteEncoding.base64(info)),
            ("environment", "Sandbox"), ("pod", "100"), ("signing-status", "0"),
        ])
    }

    /// Writes every generated seed under `folder/<target>/`.
    static func writeAll(to folder: String) {
        let chain = FuzzFixtures.chain
        let transactionBytes = Array(transaction.utf8)
        let signedTransaction = (try? chain.sign(payload: transactionBytes)) ?? ""
        var notificationObject = (try? JSONSerialization.jsonObject(with: Data(notification.utf8)) as? [String: Any]) ?? [:]
        notificationObject["data"] = ["bundleId": FuzzFixtures.bundleID, "signedTransactionInfo": signedTransaction]
        let notificationWithTransaction = Array((try? JSONSerialization.data(withJSONObject: notificationObject)) ?? Data())
        let receiptPayload = receiptPayload()
        let receipt = (try? chain.signReceipt(payload: receiptPayload)) ?? []
        // Seeds the parsers refuse would only start the fuzzer from nothing: say so loudly.
        guard ReceiptProof.parse(ByteEncoding.base64(receipt))?.kind == .appReceipt,
            ReceiptProof.parse(ByteEncoding.base64(transactionReceipt()))?.kind == .transactionReceipt
        else { fatalError("a generated receipt seed does not parse as its kind") }

        let seeds: [FuzzTarget: [String: [UInt8]]] = [
            .jws: [
                "signed": Array(signedTransaction.utf8),
                "sign-transaction": [FuzzFixtures.signMarker] + transactionBytes,
            ],
            .notification: [
                "signed-with-transaction": Array(((try? chain.sign(payload: notificationWithTransaction)) ?? "").utf8),
                "sign-with-transaction": [FuzzFixtures.signMarker] + Array(notification.utf8) + [0] + transactionBytes,
                "sign-without-transaction": [FuzzFixtures.signMarker] + Array(notification.utf8),
            ],
            .receipt: [
                "base64": Array(ByteEncoding.base64(receipt).utf8),
                "pkcs7": Array("B".utf8) + receipt,
                "sign-payload": Array("S".utf8) + receiptPayload,
                "payload": Array("P".utf8) + receiptPayload,
                "transaction-receipt": Array("T".utf8) + transactionReceipt(),
                "transaction-receipt-base64": Array(ByteEncoding.base64(transactionReceipt()).utf8),
            ],
            .serverAPI: [
                "found": Array("200\n{\"signedTransactionInfo\":\"\(signedTransaction)\"}".utf8)
            ],
        ]
        for (target, files) in seeds {
            let targetFolder = folder + "/" + target.rawValue
            _ = try? FileManager.default.createDirectory(atPath: targetFolder, withIntermediateDirectories: true)
            for (name, bytes) in files where !bytes.isEmpty {
                guard FileManager.default.createFile(atPath: targetFolder + "/" + name, contents: Data(bytes)) else {
                    fatalError("cannot write the seed \(targetFolder)/\(name)")
                }
            }
        }
    }
}

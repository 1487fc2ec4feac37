import StockroomCore

/// Receipts read locally: app receipts (PKCS#7) and iOS 6 transaction receipts (property lists).
/// The first byte picks what the rest is: `S` a payload the trusted chain signs as PKCS#7, `B`
/// PKCS#7 bytes, `P` a bare payload (DER attribute set), `T` a transaction receipt's bytes;
/// anything else is the whole input as base64 text, as a client sends it.
enum ReceiptHarness {
    static func run(_ input: [UInt8]) {
        let rest = Array(input.dropFirst())
        switch input.first {
        case UInt8(ascii: "S"):
            guard let signed = try? FuzzFixtures.chain.signReceipt(payload: rest) else { return }
            readAll(base64: ByteEncoding.base64(signed))
        case UInt8(ascii: "B"):
            // The structural reader a download uses must never read other content than OpenSSL.
            if let claimed = SignedData.claimedContent(of: rest), let content = SignedData.content(of: rest), claimed != content {
                fatalError("the BER reader and OpenSSL read different content from one SignedData")
            }
            readAll(base64: ByteEncoding.base64(rest))
        case UInt8(ascii: "P"):
            _ = AppReceipt.decode(payload: rest)
        case UInt8(ascii: "T"):
            _ = TransactionReceipt.parse(rest)
            readAll(base64: ByteEncoding.base64(rest))
        default:
            readAll(base64: String(decoding: input, as: UTF8.self))
        }
    }

    private static func readAll(base64 text: String) {
        let inspected = ReceiptInspection.inspect(base64: text, root: FuzzFixtures.chain.root)
        let untrusted = AppReceipt.readUntrusted(base64: text)
        // Both read the same payload without trust: they must agree on whether it is a receipt.
        if case .success(let inspection) = inspected, inspection.receipt != untrusted {
            fatalError("inspect and readUntrusted disagree about one receipt")
        }
        // What a download request's receiptData meets first: classification and normalisation.
        let proof = ReceiptProof.parse(text)
        if let proof, ReceiptProof.parse(proof.text) != proof {
            fatalError("a receipt's canonical text does not parse to the same proof")
        }
        _ = TransactionReceipt.parse(base64: text)
    }
}

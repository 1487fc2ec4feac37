import StockroomCore

/// App receipts read locally. The first byte picks what the rest is:
/// `S` a payload the trusted chain signs as PKCS#7, `B` PKCS#7 bytes, `P` a bare payload (DER
/// attribute set); anything else is the whole input as base64 text, as a client sends it.
enum ReceiptHarness {
    static func run(_ input: [UInt8]) {
        let rest = Array(input.dropFirst())
        switch input.first {
        case UInt8(ascii: "S"):
            guard let signed = try? FuzzFixtures.chain.signReceipt(payload: rest) else { return }
            readAll(base64: ByteEncoding.base64(signed))
        case UInt8(ascii: "B"):
            readAll(base64: ByteEncoding.base64(rest))
        case UInt8(ascii: "P"):
            _ = AppReceipt.decode(payload: rest)
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
        // VERIFY helper's parsers, once merged: `ReceiptProof.parse(text)` and the transaction-
        // receipt parser belong here, fed the same text.
    }
}

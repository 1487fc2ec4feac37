import Logging
import StockroomCore

/// Apple's answers, as a fake upstream returns the fuzz input: verifyReceipt bodies (through the
/// verdict a download would get), and App Store Server API transaction lookups (through the
/// verification of the signed transaction they return). One attempt, no waiting.
enum UpstreamHarness {
    static let oneAttempt = RetryPolicy(maximumAttempts: 1, initialBackoff: .zero, maximumBackoff: .zero, totalBudget: .seconds(10))

    /// Refusals are the normal outcome here: logging each would cost more than the run itself.
    static let quiet: Logger = {
        var logger = Logger(label: "stockroom.fuzz")
        logger.logLevel = .critical
        return logger
    }()

    static let credentials: AppStoreServerAPIClient.Credentials = {
        do {
            return .init(issuerID: "fuzz-issuer", keyID: "FUZZKEY", bundleID: FuzzFixtures.bundleID, privateKey: try ECPrivateKey())
        } catch {
            fatalError("the fuzz API key could not be made: \(error)")
        }
    }()

    /// A receipt the local parser accepts, so that the verifier asks the (fake) App Store.
    static let receiptProof: ReceiptProof = {
        guard let bytes = try? FuzzFixtures.chain.signReceipt(payload: SeedWriter.receiptPayload()),
            let proof = ReceiptProof.parse(ByteEncoding.base64(bytes))
        else { fatalError("the fuzz receipt does not parse") }
        return proof
    }()

    /// The input is a verifyReceipt body, answered with HTTP 200.
    static func runVerifyReceipt(_ input: [UInt8]) {
        let client = VerifyReceiptClient(
            transport: CannedUpstream(UpstreamResponse(status: 200, body: input)), endpoints: .base("http://fuzz.invalid"),
            policy: oneAttempt,
            logger: quiet)
        let verifier = AppStoreReceiptVerifier(client: client, bundleID: FuzzFixtures.bundleID, cacheInterval: .zero)
        let proof = receiptProof
        _ = FuzzFixtures.wait {
            await verifier.verify(
                proof, productID: "com.example.stockroom.demo.book1", transactionID: "1000000000000001", freshness: .upstreamOnly)
        }
    }

    /// The input is `STATUS` + LF, an optional `retry-after: VALUE` + LF, then the body; an input
    /// not starting with three digits and a LF is a body answered with 200.
    static func runServerAPI(_ input: [UInt8]) {
        let client = AppStoreServerAPIClient(
            credentials: credentials, endpoints: .base("http://fuzz.invalid"), transport: CannedUpstream(response(input)),
            policy: oneAttempt,
            cacheInterval: .zero, logger: quiet)
        let lookup = FuzzFixtures.wait { await client.transaction("2000000000000001") }
        if case .found(let info, _) = lookup {
            _ = FuzzFixtures.transactions.verify(info)
        }
    }

    static func response(_ input: [UInt8]) -> UpstreamResponse {
        let digits = input.prefix(3)
        guard input.count >= 4, digits.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }), input[3] == 0x0A,
            let status = Int(String(decoding: digits, as: UTF8.self))
        else { return UpstreamResponse(status: 200, body: input) }
        var rest = input.dropFirst(4)
        var headers: [String: String] = [:]
        let prefix = Array("retry-after:".utf8)
        if rest.starts(with: prefix) {
            let line = rest.prefix { $0 != 0x0A }
            headers["retry-after"] = String(decoding: line.dropFirst(prefix.count), as: UTF8.self).trimmingSpaces()
            rest = rest.dropFirst(line.count + 1)
        }
        return UpstreamResponse(status: status, headers: headers, body: Array(rest))
    }
}

/// An upstream that answers every request with one response.
struct CannedUpstream: UpstreamTransport {
    let response: UpstreamResponse

    init(_ response: UpstreamResponse) { self.response = response }

    func send(_ request: UpstreamRequest) async throws(UpstreamError) -> UpstreamResponse { response }
}

extension String {
    fileprivate func trimmingSpaces() -> String {
        String(drop { $0 == " " }.reversed().drop { $0 == " " }.reversed())
    }
}

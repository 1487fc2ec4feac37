import AppStoreSimulator
import Foundation
import Testing
@testable import StockroomCore

/// A download reads what its receipt claims without OpenSSL's certificate decoding: the
/// structural BER reader must find exactly the content OpenSSL finds, and refuse, never trap
/// on, anything else.
@Suite struct ClaimedContentTests {
    static let chain = ReceiptProofTests.chain

    static func signedReceipt(purchases: Int = 2) throws -> [UInt8] {
        try chain.signReceipt(payload: ReceiptParserTests.receipt(created: Date(), purchases: purchases).encodedPayload())
    }

    @Test(arguments: [0, 1, 2, 40, 400])
    func theReaderFindsWhatOpenSSLFinds(purchases: Int) throws {
        // The simulator signs as OpenSSL streams: BER, indefinite lengths, the content in pieces.
        let bytes = try Self.signedReceipt(purchases: purchases)
        let openSSL = try #require(SignedData.content(of: bytes))
        #expect(SignedData.claimedContent(of: bytes) == openSSL)
        #expect(AppReceipt.decode(payload: openSSL)?.purchases.count == purchases)
    }

    @Test func everyTruncationAndEveryFlippedByteIsRefusedOrReadAsOpenSSLReadsIt() async throws {
        let bytes = try Self.signedReceipt()
        for cut in 0..<bytes.count {
            let truncated = Array(bytes[..<cut])
            if let claimed = SignedData.claimedContent(of: truncated) { #expect(claimed == SignedData.content(of: truncated)) }
        }
        var generator = SystemRandomNumberGenerator()
        for round in 0..<3000 {
            if round.isMultiple(of: 100) { await Task.yield() }
            var mutated = bytes
            mutated[Int.random(in: 0..<mutated.count, using: &generator)] = UInt8.random(in: 0...255, using: &generator)
            guard let claimed = SignedData.claimedContent(of: mutated), let openSSL = SignedData.content(of: mutated) else { continue }
            #expect(claimed == openSSL)
        }
    }

    @Test func wrongContentTypesAndMissingPartsAreRefused() throws {
        let bytes = try Self.signedReceipt()
        // id-signedData's last arc (…7.2) is the 18th byte after `30 80 06 09`: make it id-data.
        var notSignedData = bytes
        let oid: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
        let at = try #require((0...(bytes.count - oid.count)).first { Array(bytes[$0..<($0 + oid.count)]) == oid })
        notSignedData[at + oid.count - 1] = 0x01
        #expect(SignedData.claimedContent(of: notSignedData) == nil)
        // A ContentInfo with no content, and one whose SignedData lacks its signer infos.
        #expect(SignedData.claimedContent(of: [0x30, 0x0B, 0x06, 0x09] + oid) == nil)
        let bare = DERWriter.sequence([
            DERWriter.element(0x06, oid),
            DERWriter.element(
                0xA0,
                DERWriter.sequence([
                    DERWriter.integer(1), DERWriter.set([]),
                    DERWriter.sequence([
                        DERWriter.element(0x06, [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]),
                        DERWriter.element(0xA0, DERWriter.octets([1, 2, 3])),
                    ]),
                ])),
        ])
        #expect(SignedData.claimedContent(of: bare) == nil)
        #expect(SignedData.claimedContent(of: bare + [0x31, 0x00]) == nil)  // outside the SignedData: still missing
    }

    @Test func deepNestingIsRefusedWithoutExhaustingTheStack() {
        // 100,000 nested indefinite-length SEQUENCEs: bounded depth, an answer at once.
        let depth = 100_000
        let bytes = Array(repeating: [UInt8]([0x30, 0x80]), count: depth).flatMap { $0 } + [UInt8](repeating: 0, count: depth * 2)
        #expect(SignedData.claimedContent(of: bytes) == nil)
        let octets =
            [0x30, 0x80] + Array(repeating: [UInt8]([0x24, 0x80]), count: depth).flatMap { $0 }
            + [UInt8](repeating: 0, count: depth * 2 + 2)
        #expect(SignedData.claimedContent(of: octets) == nil)
    }

    @Test func base64DecodingRoundTripsEveryVariant() {
        var generator = SystemRandomNumberGenerator()
        for length in 0..<200 {
            let bytes = (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let text = ByteEncoding.base64(bytes)
            #expect(ByteEncoding.decodeBase64(text) == bytes)
            #expect(ByteEncoding.decodeBase64(ByteEncoding.base64URL(bytes)) == bytes)
            #expect(ByteEncoding.decodeBase64(text.map { "\($0)\n" }.joined()) == bytes)
        }
        for bad in ["A", "AAAAA", "AA=A", "AA===", "A===", "AA*A", "AAAA=AAA", "é"] {
            #expect(ByteEncoding.decodeBase64(bad) == nil, "\(bad)")
        }
    }
}

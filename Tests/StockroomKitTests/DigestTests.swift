import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomKit

/// The library's SHA-256 on Linux (no CryptoKit): libcrypto when it loads, else its own Swift
/// code; both against FIPS 180-4's vectors, fed in pieces.
@Suite struct DigestTests {
    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    static func digest(_ bytes: [UInt8], pieces: [Int], libcrypto: Bool = true) -> String {
        var digest = SHA256Digest(libcrypto: libcrypto)
        var offset = 0
        var index = 0
        while offset < bytes.count {
            let size = min(pieces[index % pieces.count], bytes.count - offset)
            digest.update(Data(bytes[offset..<(offset + size)]))
            offset += size
            index += 1
        }
        return hex(digest.finalize())
    }

    @Test func theStandardVectorsHashAlikeHoweverTheBytesAreCut() {
        let vectors: [(String, String)] = [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
        ]
        let million = [UInt8](repeating: UInt8(ascii: "a"), count: 1_000_000)
        for libcrypto in [true, false] {
            for (text, expected) in vectors {
                for pieces in [[1], [3, 7], [64], [1000]] {
                    #expect(
                        Self.digest(Array(text.utf8), pieces: pieces, libcrypto: libcrypto) == expected, "\(text) in pieces of \(pieces)")
                }
            }
            #expect(
                Self.digest(million, pieces: [4096, 63, 65, 1], libcrypto: libcrypto)
                    == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
        }
    }

    @Test func libcryptoHashesWhereTheSystemHasIt() {
        // Debian's libssl3 (which the server needs) is on every machine these tests run on.
        #expect(SHA256Digest().usesLibcrypto)
        #expect(!SHA256Digest(libcrypto: false).usesLibcrypto)
    }

    @Test func aCopiedDigestHashesOnItsOwn() {
        var first = SHA256Digest()
        first.update(Data("ab".utf8))
        var second = first
        second.update(Data("c".utf8))
        first.update(Data("x".utf8))
        #expect(Self.hex(second.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", "abc")
        #expect(Self.hex(first.finalize()) == Self.digest(Array("abx".utf8), pieces: [3], libcrypto: false))

        var kept = SHA256Digest()
        kept.update(Data("ab".utf8))
        let finished = kept
        #expect(Self.hex(finished.finalize()) == Self.digest(Array("ab".utf8), pieces: [2], libcrypto: false))
        kept.update(Data("c".utf8))
        #expect(
            Self.hex(kept.finalize()) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
            "hashing goes on after a copy was finalized")
    }

    @Test func aFileIsHashedAsItsBytesAre() throws {
        let folder = try TemporaryFolder()
        let bytes = sampleBytes(count: 3_000_001, seed: 3)
        let path = try folder.write("file.bin", bytes)
        let hashed = try SHA256Digest.ofFile(path)
        #expect(hashed.bytes == 3_000_001)
        #expect(Self.hex(hashed.digest.finalize()) == Self.digest(bytes, pieces: [1 << 20]))
        let prefix = try SHA256Digest.ofFile(path, length: 10)
        #expect(Self.hex(prefix.digest.finalize()) == Self.digest(Array(bytes.prefix(10)), pieces: [10]))
    }
}

/// The journal on disk.
@Suite struct JournalTests {
    @Test func aNewJournalFolderIsThisUsersOnlyAndAnEntryReadsBackAsWritten() throws {
        let folder = try TemporaryFolder()
        let journal = try Journal(folder: URL(fileURLWithPath: folder.path + "/journal"))
        let permissions = try FileManager.default.attributesOfItem(atPath: folder.path + "/journal")[.posixPermissions] as? Int
        #expect(permissions == 0o700, "entries hold replayable proofs")
        var entry = JournalEntry(
            transactionID: "2000000000000001", originalTransactionID: nil, productID: "com.example.book",
            renewal: .download(.appReceipt(Data([1, 2, 3]))), appAccountToken: UUID(), consent: true,
            destination: folder.path + "/files/book")
        entry.token = "v1.token"
        entry.stage = .placed
        try journal.write(entry)
        #expect(try journal.entry("2000000000000001") == entry)
        #expect(try journal.entries() == [entry])
        #expect(try journal.entry("2000000000000002") == nil)
        #expect(entry.partialPath == folder.path + "/files/.book.2000000000000001.partial", "beside the destination, for an atomic rename")
    }
}

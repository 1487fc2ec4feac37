import StockroomTestSupport
import Testing
@testable import StockroomCore

@Suite struct CryptoTests {
    @Test func sha256MatchesTheFIPSVectors() {
        #expect(ByteEncoding.hex(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(ByteEncoding.hex(SHA256.hash([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    }

    @Test func incrementalSHA256EqualsOneShot() {
        let bytes = sampleBytes(count: 100_000)
        var hasher = SHA256()
        for chunk in stride(from: 0, to: bytes.count, by: 7_777) {
            hasher.update(Array(bytes[chunk..<min(chunk + 7_777, bytes.count)]))
        }
        #expect(hasher.finalize() == SHA256.hash(bytes))
    }

    @Test func hmacSHA256MatchesRFC4231TestCase2() {
        let code = HMACSHA256.authenticationCode(for: Array("what do ya want for nothing?".utf8), key: Array("Jefe".utf8))
        #expect(ByteEncoding.hex(code) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    }

    @Test func hmacValidationRejectsAnyChangedByte() {
        let key = secureRandomBytes(count: 32)
        let message = Array("tx=1000000001|product=com.example.a|exp=1700000000".utf8)
        let code = HMACSHA256.authenticationCode(for: message, key: key)
        #expect(HMACSHA256.isValid(code, for: message, key: key))
        for index in code.indices {
            var forged = code
            forged[index] ^= 0x01
            #expect(!HMACSHA256.isValid(forged, for: message, key: key))
        }
        #expect(!HMACSHA256.isValid(Array(code.dropLast()), for: message, key: key))
    }

    @Test func secureRandomBytesDiffer() {
        #expect(secureRandomBytes(count: 32) != secureRandomBytes(count: 32))
    }

    @Test func base64RoundTripsEveryLength() {
        for length in 0..<40 {
            let bytes = sampleBytes(count: length, seed: UInt64(length))
            #expect(ByteEncoding.decodeBase64(ByteEncoding.base64(bytes)) == bytes)
            #expect(ByteEncoding.decodeBase64(ByteEncoding.base64URL(bytes)) == bytes)
        }
        #expect(ByteEncoding.base64(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(ByteEncoding.decodeBase64("Zm9v\nYmE=") == Array("fooba".utf8))
        #expect(ByteEncoding.decodeBase64("Zm9v!") == nil)
        #expect(ByteEncoding.decodeBase64("Zg=a") == nil)
        #expect(ByteEncoding.decodeBase64("Z") == nil)
    }
}

import COpenSSL
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

    /// OpenSSL's own encoding of r‖s (`i2d_ECDSA_SIG`), to compare `ECPublicKey.der` with.
    static func opensslDER(_ signature: [UInt8]) -> [UInt8] {
        let value = ECDSA_SIG_new()!
        defer { ECDSA_SIG_free(value) }
        let r = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress, 32, nil) }
        let s = signature.withUnsafeBufferPointer { BN_bin2bn($0.baseAddress! + 32, 32, nil) }
        #expect(ECDSA_SIG_set0(value, r, s) == 1)
        var pointer: UnsafeMutablePointer<UInt8>?
        let length = i2d_ECDSA_SIG(value, &pointer)
        defer { stockroom_OPENSSL_free(pointer) }
        return Array(UnsafeBufferPointer(start: pointer, count: Int(length)))
    }

    @Test func aJOSESignatureBecomesTheDEROpenSSLWrites() {
        let zero = [UInt8](repeating: 0, count: 32)
        let high = [UInt8](repeating: 0xFF, count: 32)
        let leadingZeros = [0, 0, 0x7F] + [UInt8](repeating: 0x11, count: 29)
        let zeroThenHigh = [0, 0x80] + [UInt8](repeating: 0x22, count: 30)
        let small = [UInt8](repeating: 0, count: 31) + [1]
        var cases = [zero + zero, high + high, leadingZeros + zeroThenHigh, zeroThenHigh + small, small + leadingZeros]
        for seed in 0..<2_000 { cases.append(sampleBytes(count: 64, seed: UInt64(seed))) }
        for signature in cases { #expect(ECPublicKey.der(signature) == Self.opensslDER(signature)) }
    }

    @Test func aSignatureVerifiesOnlyForItsMessageAndItsKey() async throws {
        let key = try ECPrivateKey()
        let other = try ECPrivateKey().publicKey
        let verifier = key.publicKey
        // Several tasks at once share the key's prepared contexts.
        try await withThrowingTaskGroup(of: Void.self) { group in
            for task in 0..<4 {
                group.addTask {
                    for index in 0..<150 {
                        let message = sampleBytes(count: 1 + index * 37, seed: UInt64(task * 1_000 + index))
                        let signature = try key.sign(message)
                        #expect(verifier.isValidSignature(signature, for: message))
                        #expect(!other.isValidSignature(signature, for: message))
                        var changed = message
                        changed[index % changed.count] ^= 0x01
                        #expect(!verifier.isValidSignature(signature, for: changed))
                        var bent = signature
                        bent[index % 64] ^= 0x80
                        #expect(!verifier.isValidSignature(bent, for: message))
                        #expect(!verifier.isValidSignature(Array(signature.prefix(63)), for: message))
                        #expect(!verifier.isValidSignature([UInt8](repeating: 0, count: 64), for: message))
                    }
                }
            }
            try await group.waitForAll()
        }
    }

    /// A secp256k1 key: 256 bits like P-256, and not a curve ES256 allows.
    static let secp256k1PEM = """
        -----BEGIN PRIVATE KEY-----
        MIGEAgEAMBAGByqGSM49AgEGBSuBBAAKBG0wawIBAQQgGS1bG+njNaLjS0FsfC5t
        jjKk+RlX8iKFecYkoUYePEChRANCAARhzNnwScNJmQEYeFA58cCN6coNFSEMd517
        JRofUVb4rEVKYP+QKAtbx1UbE5hgURtF1qlPL74hPW2HrSDxeLWv
        -----END PRIVATE KEY-----
        """

    @Test func anotherCurveOf256BitsIsNotES256() throws {
        #expect(throws: CryptoError.invalidKey("not a P-256 EC key")) { try ECPrivateKey(pem: Self.secp256k1PEM) }
        // Its own valid signature, made with OpenSSL directly, is refused.
        let key: OpaquePointer = try #require(
            Array(Self.secp256k1PEM.utf8).withUnsafeBytes { buffer in
                let bio = BIO_new_mem_buf(buffer.baseAddress, Int32(buffer.count))
                defer { BIO_free(bio) }
                return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
            })
        let message = Array("header.payload".utf8)
        let context = try #require(EVP_MD_CTX_new())
        defer { EVP_MD_CTX_free(context) }
        var der = [UInt8](repeating: 0, count: 80)
        var length = der.count
        #expect(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1)
        #expect(EVP_DigestSign(context, &der, &length, message, message.count) == 1)
        var cursor: UnsafePointer<UInt8>? = nil
        let value = try #require(
            der.withUnsafeBufferPointer { buffer in
                cursor = buffer.baseAddress
                return d2i_ECDSA_SIG(nil, &cursor, length)
            })
        defer { ECDSA_SIG_free(value) }
        var jose = [UInt8](repeating: 0, count: 64)
        jose.withUnsafeMutableBufferPointer { out in
            _ = BN_bn2binpad(ECDSA_SIG_get0_r(value), out.baseAddress, 32)
            _ = BN_bn2binpad(ECDSA_SIG_get0_s(value), out.baseAddress! + 32, 32)
        }
        #expect(ECPublicKey.der(jose) == Array(der.prefix(length)), "the signature itself is well formed")
        #expect(!ECPublicKey(owning: key).isValidSignature(jose, for: message))
    }
}

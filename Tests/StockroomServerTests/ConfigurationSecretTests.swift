import Foundation
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The download-token secret: long enough, and kept where only its owner can read it.
@Suite struct ConfigurationSecretTests {
    static func mode(_ path: String) throws -> Int {
        try #require(try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }

    @Test func aTokenSecretShorterThan32BytesRefusesStart() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.tokenSecret = "too-short-secret"
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)" == "STOCKROOM_TOKEN_SECRET must be at least 32 bytes; it has 16"
        }
    }

    @Test func aGeneratedSecretIsCreatedOwnerOnlyAndKept() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.tokenSecret = nil
        _ = try await fixture.application()
        let path = fixture.configuration.tokenSecretPath
        #expect(try Self.mode(path) == 0o600)
        let first = try DownloadTokenSigner.loadKey(configured: nil, file: path)
        _ = try await fixture.application()
        #expect(try DownloadTokenSigner.loadKey(configured: nil, file: path) == first, "a restart keeps the same key")
        #expect(first.count == 32)
    }

    @Test func aSecretFileOthersCanReadRefusesStart() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.tokenSecret = nil
        let path = fixture.configuration.tokenSecretPath
        try fixture.root.write("stockroom.sqlite.token-secret", ByteEncoding.base64([UInt8](repeating: 7, count: 32)) + "\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: path)
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)"
                == #"""
                the download-token secret "\#(path)" cannot be used: mode 644 lets others read it; chmod 600 it, or delete it to make \#
                a new one
                """#
        }
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(try DownloadTokenSigner.loadKey(configured: nil, file: path) == [UInt8](repeating: 7, count: 32))
    }

    @Test func aSecretFileWithoutAKeyIsRefusedNotReplaced() throws {
        let folder = try TemporaryFolder()
        let path = try folder.write("secret", "not a key\n")
        try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
        #expect(throws: TokenSecretError.malformed) { try DownloadTokenSigner.loadKey(configured: nil, file: path) }
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "not a key\n")
    }

    @Test func aSecretPathThatIsALinkIsRefused() throws {
        let folder = try TemporaryFolder()
        let target = try folder.write("elsewhere", ByteEncoding.base64([UInt8](repeating: 1, count: 32)))
        try FileManager.default.createSymbolicLink(atPath: folder.path + "/secret", withDestinationPath: target)
        #expect(throws: TokenSecretError.notAFile) { try DownloadTokenSigner.loadKey(configured: nil, file: folder.path + "/secret") }
    }
}

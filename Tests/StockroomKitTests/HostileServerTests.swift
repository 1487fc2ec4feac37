import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

/// A server that lies, in each of the ways a compromised host, a captive portal or anyone on the
/// path of an `http://` server can, driving `Delivery` itself. For each: what the outcome is, that
/// no file outside the client's folders changed, that no proof or token reached another host, and
/// that nothing was safe to finish without a 2xx acknowledgement.
@Suite struct HostileServerTests {
    static let transaction = "1000000000000001"
    static let product = "com.example.book"
    static let proof = "eyJhbGciOiJFUzI1NiJ9.eyJ0cmFuc2FjdGlvbklkIjoiMSJ9.c2ln"
    static let body = sampleBytes(count: 20_000, seed: 5)
    static var digest: String {
        var hasher = SHA256Digest()
        hasher.update(Data(body))
        return Data(hasher.finalize()).base64EncodedString()
    }

    /// A download's head and body as Stockroom sends it, with headers replaced or added.
    static func download(_ status: String = "200 OK", headers: [String: String] = [:], body: [UInt8] = body, cut: Int? = nil)
        -> [ScriptedHTTPServer.Step]
    {
        var fields = [
            "Content-Length": "\(body.count)", "ETag": "\"v1\"", "Repr-Digest": "sha-256=:\(digest):", "X-Download-Token": "token-1",
            "Location": "/v1/downloads/\(transaction)/content",
        ]
        for (name, value) in headers { fields[name] = value.isEmpty ? nil : value }
        let head = "HTTP/1.1 \(status)\r\n" + fields.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)\r\n" }.joined() + "\r\n"
        let sent = cut.map { Array(body.prefix($0)) } ?? body
        return [.send(head), .raw(sent)] + (cut == nil ? [] : [.close])
    }

    static func answer(_ status: String, _ json: String, headers: String = "") -> [ScriptedHTTPServer.Step] {
        [.send("HTTP/1.1 \(status)\r\nContent-Type: application/json\r\nContent-Length: \(json.utf8.count)\r\n\(headers)\r\n\(json)")]
    }

    static let acknowledged = answer("200 OK", #"{"acknowledged": true}"#)

    /// The client's folders beside victims it must never touch: one beside the files folder, one
    /// in a sibling folder, one inside the files folder that the client did not make.
    struct Scene {
        let root: TemporaryFolder
        let elsewhere: ScriptedHTTPServer
        var files: String { root.path + "/app/files" }
        var journal: String { root.path + "/app/journal" }
        static let victims = ["app/victim_file", "sibling/victim_file", "app/files/keep.txt", "victim_file"]

        init() throws {
            root = try TemporaryFolder()
            elsewhere = try ScriptedHTTPServer { _ in HostileServerTests.answer("200 OK", #"{"acknowledged": true}"#) }
            for victim in Self.victims { _ = try root.write(victim, Array("untouched \(victim)".utf8)) }
        }

        func delivery(_ server: ScriptedHTTPServer, adjust: (inout Delivery.Configuration) -> Void = { _ in }) throws -> Delivery {
            var configuration = Delivery.Configuration(
                server: server.url, journalFolder: URL(fileURLWithPath: journal), folder: URL(fileURLWithPath: files))
            configuration.requestTimeout = 2
            configuration.maximumInterruptions = 1
            adjust(&configuration)
            return try Delivery(configuration: configuration)
        }

        /// Every victim as it was planted, and nothing new outside the client's two folders.
        func untouched() -> Bool {
            for victim in Self.victims
            where FileManager.default.contents(atPath: root.path + "/" + victim) != Data("untouched \(victim)".utf8) {
                return false
            }
            let top = Set((try? FileManager.default.contentsOfDirectory(atPath: root.path)) ?? [])
            let app = Set((try? FileManager.default.contentsOfDirectory(atPath: root.path + "/app")) ?? [])
            return top == ["app", "sibling", "victim_file"] && app.isSubset(of: ["files", "journal", "victim_file"])
        }

        /// Whether any request that reached the other host carried the proof or a token.
        var secretsElsewhere: Bool {
            elsewhere.requests.contains { request in
                request.header("Authorization") != nil || String(decoding: request.body, as: UTF8.self).contains(HostileServerTests.proof)
            }
        }
    }

    static func purchase(product: String = product, transaction: String = transaction) -> Purchase {
        Purchase(productID: product, transactionID: transaction, proof: .signedTransaction(proof))
    }

    static func restoreAnswer(_ products: [(product: String, transaction: String, location: String)]) -> [ScriptedHTTPServer.Step] {
        let items = products.map {
            #"{"productId": "\#($0.product)", "transactionId": "\#($0.transaction)", "token": "t", "location": "\#($0.location)"}"#
        }
        return answer("200 OK", #"{"products": [\#(items.joined(separator: ", "))]}"#)
    }

    // MARK: Names from the network never become paths

    @Test func aRestoreThatNamesPathsWritesAndRemovesNothingOutsideTheFolder() async throws {
        let scene = try Scene()
        let names: [(product: String, transaction: String, location: String)] = [
            ("../../../victim_file", "1000000000000002", "/c/2"), ("..", "1000000000000003", "/c/3"), ("", "1000000000000004", "/c/4"),
            ("../sibling/victim_file", "1000000000000005", "/c/5"), (Self.product, "../../1000000000000006", "/c/6"),
            ("com.example.other", "1000000000000007/..", "/c/7"),
        ]
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") { return Self.restoreAnswer(names) }
            if request.line.hasPrefix("GET /v1/catalog") { return Self.answer("404 Not Found", "{}") }
            // Whatever is fetched is refunded: a revocation must not remove anything either.
            return Self.answer("403 Forbidden", #"{"error": {"code": "revoked", "message": "refunded"}}"#)
        }
        defer { server.stop() }
        let delivery = try scene.delivery(server)
        let restored = try await delivery.restore(signedTransaction: Self.proof).get()
        #expect(restored.count == names.count)
        #expect(
            restored.allSatisfy { $0.outcome.code == "invalid_name" && $0.outcome.transactionAction == .appDecides },
            "\(restored.map(\.outcome))")
        #expect(server.requests.map(\.line) == ["POST /v1/restores HTTP/1.1", "GET /v1/catalog HTTP/1.1"], "no name was fetched")
        #expect(scene.untouched())
        #expect(try FileManager.default.contentsOfDirectory(atPath: scene.files) == ["keep.txt"])
    }

    @Test func aRestoreDeliversOnlyWhatTheAppsCatalogueSells() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") {
                return Self.restoreAnswer([("com.example.other", "1000000000000009", "/v1/downloads/1000000000000009/content")])
            }
            return Self.download()
        }
        defer { server.stop() }
        let delivery = try scene.delivery(server) { $0.catalog = Catalog(products: [Catalog.Product(productID: Self.product)]) }
        let restored = try await delivery.restore(signedTransaction: Self.proof).get()
        #expect(restored.map(\.outcome.code) == ["not_in_catalogue"])
        #expect(server.requests.map(\.line) == ["POST /v1/restores HTTP/1.1"])
        #expect(scene.untouched())
    }

    @Test func aSymbolicLinkWhereThePartialFileOrTheFileGoesIsReplacedNeverWrittenThrough() async throws {
        let scene = try Scene()
        try FileManager.default.createDirectory(atPath: scene.files, withIntermediateDirectories: true)
        let partial = scene.files + "/.\(Self.product).\(Self.transaction).partial"
        try FileManager.default.createSymbolicLink(atPath: partial, withDestinationPath: scene.root.path + "/app/victim_file")
        try FileManager.default.createSymbolicLink(
            atPath: scene.files + "/" + Self.product, withDestinationPath: scene.root.path + "/sibling/victim_file")
        let server = try ScriptedHTTPServer { request in request.line.contains("/ack") ? Self.acknowledged : Self.download() }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome == .delivered(file: URL(fileURLWithPath: scene.files + "/" + Self.product)))
        #expect(LocalFile.regularFileSize(scene.files + "/" + Self.product) == Int64(Self.body.count), "a regular file, not the link")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == Data(Self.body))
        #expect(scene.untouched())
    }

    @Test func aPurchaseWhoseNamesAreNotTheAppStoresIsRefusedBeforeAnyRequest() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in Self.download() }
        defer { server.stop() }
        let delivery = try scene.delivery(server)
        for (product, transaction) in [("..", Self.transaction), ("a/b", Self.transaction), (Self.product, "12/34"), (Self.product, "")] {
            let outcome = await delivery.deliver(Self.purchase(product: product, transaction: transaction))
            #expect(outcome.code == "invalid_name")
        }
        #expect(server.requests.isEmpty)
        #expect(scene.untouched())
    }

    // MARK: Secrets stay with their origin

    @Test(arguments: ["307 Temporary Redirect", "308 Permanent Redirect", "302 Found"])
    func aRedirectOfTheProofIsNeverFollowed(_ status: String) async throws {
        let scene = try Scene()
        let target = scene.elsewhere.url.absoluteString + "/v1/downloads"
        let server = try ScriptedHTTPServer { _ in [.send("HTTP/1.1 \(status)\r\nLocation: \(target)\r\nContent-Length: 0\r\n\r\n")] }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.code == "redirected")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        #expect(scene.elsewhere.requests.isEmpty)
        #expect(scene.untouched())
    }

    @Test(arguments: ["absolute", "scheme-relative", "userinfo", "backslash"])
    func aLocationOffTheServerNeverReceivesTheToken(_ form: String) async throws {
        let scene = try Scene()
        let other = scene.elsewhere.url
        let location =
            switch form {
            case "absolute": "\(other.absoluteString)/v1/downloads/\(Self.transaction)/content"
            case "scheme-relative": "//127.0.0.1:\(scene.elsewhere.port)/v1/downloads/\(Self.transaction)/content"
            case "userinfo": "http://user@127.0.0.1:\(scene.elsewhere.port)/content"
            default: "/\\127.0.0.1:\(scene.elsewhere.port)/content"
            }
        let server = try ScriptedHTTPServer { request in
            request.line.contains("/ack") ? Self.acknowledged : Self.download(headers: ["Location": location], cut: 5_000)
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(!scene.secretsElsewhere)
        #expect(scene.elsewhere.requests.isEmpty)
        #expect(scene.untouched())
    }

    @Test func aRestoreWhoseLocationIsOffTheServerIsRefusedForThatProduct() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { [port = scene.elsewhere.port] request in
            if request.line.hasPrefix("POST /v1/restores") {
                return Self.restoreAnswer([(Self.product, Self.transaction, "http://127.0.0.1:\(port)/steal")])
            }
            return Self.answer("404 Not Found", "{}")
        }
        defer { server.stop() }
        let restored = try await scene.delivery(server).restore(signedTransaction: Self.proof).get()
        #expect(restored.map(\.outcome.code) == ["bad_answer"])
        #expect(scene.elsewhere.requests.isEmpty)
    }

    // MARK: Safe to finish means a 2xx acknowledgement from the server

    @Test func anAcknowledgementAnswered500IsNeverSafeToFinishNotEvenWithTheFileOnDisk() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") {
                return Self.restoreAnswer([(Self.product, Self.transaction, "/v1/downloads/\(Self.transaction)/content")])
            }
            if request.line.contains("/ack") {
                return Self.answer("500 Internal Server Error", #"{"error": {"code": "internal", "message": "no"}}"#)
            }
            if request.line.hasPrefix("GET /v1/catalog") { return Self.answer("404 Not Found", "{}") }
            return Self.download()
        }
        defer { server.stop() }
        for run in 1...2 {
            let delivery = try scene.delivery(server) { $0.now = { Date().addingTimeInterval(Double(run) * 100_000) } }
            let restored = try await delivery.restore(signedTransaction: Self.proof).get()
            #expect(restored.count == 1)
            #expect(restored.first?.outcome.transactionAction == .keepUnfinishedAndRetry, "run \(run): \(restored)")
            #expect(restored.first?.outcome.code == "internal")
        }
        #expect(
            server.requests.filter { $0.line.contains("/ack") }.count >= 2,
            "the second run acknowledged again instead of reporting the file on disk")
        #expect(FileManager.default.contents(atPath: scene.files + "/" + Self.product) == Data(Self.body))
    }

    @Test func aFileOnDiskWithTheCataloguesDigestIsAcknowledgedBeforeItIsSafeToFinish() async throws {
        let scene = try Scene()
        _ = try scene.root.write("app/files/\(Self.product)", Self.body)
        let hex = Data(base64Encoded: Self.digest)!.map { String(format: "%02x", $0) }.joined()
        let server = try ScriptedHTTPServer { request in
            if request.line.hasPrefix("POST /v1/restores") {
                return Self.restoreAnswer([(Self.product, Self.transaction, "/v1/downloads/\(Self.transaction)/content")])
            }
            if request.line.hasPrefix("GET /v1/catalog") {
                return Self.answer(
                    "200 OK", #"{"products": [{"productId": "\#(Self.product)", "sha256": "\#(hex)", "size": \#(Self.body.count)}]}"#)
            }
            if request.line.contains("/ack") { return [.send("HTTP/1.1 204 No Content\r\n\r\n")] }
            return Self.download()
        }
        defer { server.stop() }
        let restored = try await scene.delivery(server).restore(signedTransaction: Self.proof).get()
        #expect(restored.first?.outcome == .delivered(file: URL(fileURLWithPath: scene.files + "/" + Self.product)))
        #expect(restored.first?.downloaded == false)
        #expect(
            server.requests.map(\.line) == [
                "POST /v1/restores HTTP/1.1", "GET /v1/catalog HTTP/1.1", "POST /v1/downloads/\(Self.transaction)/ack HTTP/1.1",
            ],
            "a 204 acknowledgement counts, and nothing was downloaded")
    }

    @Test func anAcknowledgementRedirectedElsewhereDoesNotCount() async throws {
        let scene = try Scene()
        let target = scene.elsewhere.url.absoluteString + "/ack"
        let server = try ScriptedHTTPServer { request in
            request.line.contains("/ack")
                ? [.send("HTTP/1.1 307 Temporary Redirect\r\nLocation: \(target)\r\nContent-Length: 0\r\n\r\n")] : Self.download()
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.code == "redirected")
        #expect(outcome.transactionAction != .finish)
        #expect(scene.elsewhere.requests.isEmpty)
    }

    // MARK: Every number and every wait is bounded

    @Test(arguments: ["9223372036854775807", "99999999999", "184467440737095516150", "Fri, 31 Dec 9999 23:59:59 GMT"])
    func aRetryAfterOfYearsIsADayAndNeverTraps(_ field: String) async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in
            Self.answer(
                "503 Service Unavailable", #"{"error": {"code": "upstream_unavailable", "message": "later"}}"#,
                headers: "Retry-After: \(field)\r\n")
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        guard case .retryLater(let after, _) = outcome else { Issue.record("\(outcome)"); return }
        #expect(after == Delivery.longestWait)
        // A relaunch reads the date back, without a request and without a trap.
        let again = try await scene.delivery(server).deliver(Self.purchase())
        guard case .retryLater(let wait, _) = again else { Issue.record("\(again)"); return }
        #expect(wait <= Delivery.longestWait && wait >= .seconds(86_000))
        #expect(server.requests.count == 1)
    }

    @Test func aJournalDateOfAnyMagnitudeIsReadAsADayAtMost() async throws {
        let scene = try Scene()
        let journal = try Journal(folder: URL(fileURLWithPath: scene.journal))
        var entry = JournalEntry(
            transactionID: Self.transaction, originalTransactionID: nil, productID: Self.product,
            renewal: .download(.signedTransaction(Self.proof)),
            appAccountToken: nil, consent: nil, destination: scene.files + "/" + Self.product)
        entry.notBefore = Date(timeIntervalSince1970: 1e18)
        try journal.write(entry)
        let server = try ScriptedHTTPServer { _ in Self.download() }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        guard case .retryLater(let after, _) = outcome else { Issue.record("\(outcome)"); return }
        #expect(after == Delivery.longestWait)
    }

    @Test(arguments: ["close-delimited", "chunked"])
    func aBodyWithNoLengthIsNeverWritten(_ form: String) async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { request in
            let framing = form == "chunked" ? "Transfer-Encoding: chunked\r\n" : "Connection: close\r\n"
            let head = "HTTP/1.1 200 OK\r\n\(framing)Repr-Digest: sha-256=:\(Self.digest):\r\nX-Download-Token: t\r\nLocation: /c\r\n\r\n"
            let chunk =
                form == "chunked" ? "4000\r\n" + String(repeating: "a", count: 0x4000) + "\r\n" : String(repeating: "a", count: 0x4000)
            return [.send(head)] + Array(repeating: ScriptedHTTPServer.Step.send(chunk), count: 200) + [.close]
        }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(LocalFile.regularFileSize(scene.files + "/.\(Self.product).\(Self.transaction).partial") ?? 0 == 0)
        #expect(scene.untouched())
    }

    @Test func aBodyLongerThanTheCataloguesSizeIsNeverWritten() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in Self.download() }
        defer { server.stop() }
        let delivery = try scene.delivery(server) {
            $0.catalog = Catalog(products: [Catalog.Product(productID: Self.product, size: 1_000)])
        }
        let outcome = await delivery.deliver(Self.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(LocalFile.regularFileSize(scene.files + "/.\(Self.product).\(Self.transaction).partial") ?? 0 == 0)
    }

    @Test func aDownloadWithNoDigestIsNeverWritten() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in Self.download(headers: ["Repr-Digest": ""]) }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(server.requests.count == 1, "not downloaded again and again")
    }

    /// A head refused with no body after it (nothing arrived to stop) is refused all the same: it
    /// once counted as a new grant to use at once, and brought 40 requests before `no_progress`.
    @Test(arguments: TransportTests.engines)
    func anEmptyDownloadWithNoDigestIsRefusedAtTheFirstAnswer(_ engine: HTTPTransport.Engine) async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in Self.download(headers: ["Repr-Digest": ""], body: []) }
        defer { server.stop() }
        let outcome = try await scene.delivery(server) { $0.transportEngine = engine }.deliver(Self.purchase())
        #expect(outcome.code == "bad_answer", "\(outcome)")
        #expect(server.requests.count == 1)
    }

    @Test func aBodyTrickledAByteAtATimeEndsInRetryLater() async throws {
        let scene = try Scene()
        let server = try ScriptedHTTPServer { _ in
            let head = Self.download().first!
            return [head] + Array(repeating: [ScriptedHTTPServer.Step.bytes(1), .pause(0.5)], count: 600).flatMap { $0 }
        }
        defer { server.stop() }
        let started = Date()
        let outcome = try await scene.delivery(server) { $0.requestTimeout = 1 }.deliver(Self.purchase())
        #expect(outcome.code == "network", "\(outcome)")
        #expect(outcome.transactionAction == .keepUnfinishedAndRetry)
        // Two transfers of one 1 s window each, and the pause between; the margin is for a loaded machine.
        #expect(Date().timeIntervalSince(started) < 30, "not the 300 s the body would take")
    }

    // MARK: The journal is private and heals

    @Test func aJournalFolderOpenToAllIsMadePrivateWithItsEntries() async throws {
        let scene = try Scene()
        try FileManager.default.createDirectory(atPath: scene.journal, withIntermediateDirectories: true)
        _ = try scene.root.write("app/journal/other.json", Array("{}".utf8))
        chmod(scene.journal, 0o777)
        chmod(scene.journal + "/other.json", 0o666)
        let server = try ScriptedHTTPServer { request in request.line.contains("/ack") ? Self.acknowledged : Self.download() }
        defer { server.stop() }
        let outcome = try await scene.delivery(server).deliver(Self.purchase())
        #expect(outcome.transactionAction == .finish)
        #expect(Self.mode(scene.journal) == 0o700)
        #expect(Self.mode(scene.journal + "/other.json") == 0o600)
        #expect(Self.mode(scene.journal + "/\(Self.transaction).json") == 0o600)
    }

    @Test(arguments: ["deep", "truncated", "link", "huge", "another transaction"])
    func anUnreadableJournalEntryIsSetAsideAndThePurchaseStartsOver(_ damage: String) async throws {
        let scene = try Scene()
        let entryPath = scene.journal + "/\(Self.transaction).json"
        try FileManager.default.createDirectory(atPath: scene.journal, withIntermediateDirectories: true)
        switch damage {
        case "deep": _ = try scene.root.write("app/journal/\(Self.transaction).json", Array(String(repeating: "[", count: 513).utf8))
        case "truncated":
            _ = try scene.root.write("app/journal/\(Self.transaction).json", Array(#"{"transactionID": "1000000000000001", "produ"#.utf8))
        case "link":
            try FileManager.default.createSymbolicLink(atPath: entryPath, withDestinationPath: scene.root.path + "/app/victim_file")
        case "huge":
            _ = try scene.root.write("app/journal/\(Self.transaction).json", [UInt8](repeating: 0x20, count: Journal.maximumEntrySize + 1))
        default:
            let other = JournalEntry(
                transactionID: "1000000000000099", originalTransactionID: nil, productID: Self.product,
                renewal: .download(.signedTransaction("x.y.z")),
                appAccountToken: nil, consent: nil, destination: "/tmp/elsewhere")
            _ = try scene.root.write("app/journal/\(Self.transaction).json", Array(try JSONEncoder().encode(other)))
        }
        let events = EventLog()
        let server = try ScriptedHTTPServer { request in request.line.contains("/ack") ? Self.acknowledged : Self.download() }
        defer { server.stop() }
        let outcome = try await scene.delivery(server) { configuration in configuration.observer = { events.append($0) } }.deliver(
            Self.purchase())
        #expect(outcome.transactionAction == .finish, "\(outcome)")
        #expect(events.all.contains { if case .journalEntrySetAside(Self.transaction, _) = $0 { true } else { false } })
        let names = try FileManager.default.contentsOfDirectory(atPath: scene.journal)
        #expect(names.contains { $0.hasPrefix("\(Self.transaction).json.set-aside-") }, "kept for a look: \(names)")
        #expect(LocalFile.regularFileSize(entryPath) != nil, "a new entry replaced it")
        #expect(scene.untouched())
    }

    static func mode(_ path: String) -> Int? {
        (try? FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int)
    }
}

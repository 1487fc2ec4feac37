import AppStoreSimulator
import Foundation
import StockroomCore
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A test CA made at test time with the `openssl` CLI (root → intermediate → leaves, EC P-256,
/// Apple's marker OIDs, an AIA OCSP URL on loopback), and `openssl ocsp` responders serving it:
/// the intermediate's (a delegated responder certificate signs) for the leaves, the root's (the
/// root signs) for the intermediate, and a rogue one that signs with a key of its own. Each
/// responder picks its own port (`-port 0`) and logs every request it gets, which the tests count.
/// (No probe connection: `openssl ocsp` 3.0 stops answering after a connection that sends nothing.)
///
/// Leaves: `good` (listed valid), `revoked` (listed revoked), `unknown` (not listed), `down`
/// (its AIA names a loopback port nobody listens on), `rogue` (its AIA names the rogue responder).
public final class OCSPResponderFixture: Sendable {
    public static let bundle = "com.example.stockroom.demo"
    /// The product the fixture's transactions name unless told.
    public static let product = "com.example.stockroom.demo.book1"
    public static let leafNames = ["good", "revoked", "unknown", "down", "rogue"]

    public let folder: TemporaryFolder
    public let root: Certificate
    public let intermediate: Certificate
    public let leaves: [String: (key: ECPrivateKey, certificate: Certificate)]
    /// The root's PEM file, as `--trust-root` takes it.
    public var rootPath: String { folder.path + "/root.pem" }
    /// The intermediate's responder (the leaves' AIA).
    public let leafResponder: Responder
    /// The root's responder (the intermediate's AIA).
    public let rootResponder: Responder
    public let rogueResponder: Responder

    /// One `openssl ocsp` child: its port, and the log that names each request it got.
    public struct Responder: Sendable {
        public let process: ChildProcess
        public let port: Int
        public let log: String
    }

    /// `nextUpdateMinutes`: the responders' `-nmin` (nil: answers without `nextUpdate`).
    public static func start(nextUpdateMinutes: Int? = 1) async throws -> OCSPResponderFixture {
        let folder = try TemporaryFolder()
        try folder.write(
            "leaves.txt",
            Array(
                """
                V\t301231235959Z\t\t1001\tunknown\t/CN=good
                R\t301231235959Z\t240101000000Z\t1002\tunknown\t/CN=revoked
                V\t301231235959Z\t\t1004\tunknown\t/CN=down
                V\t301231235959Z\t\t1005\tunknown\t/CN=rogue

                """.utf8))
        try folder.write("roots.txt", Array("V\t301231235959Z\t\t2001\tunknown\t/CN=OCSP Test Intermediate\n".utf8))
        let update = nextUpdateMinutes.map { ["-nmin", String($0)] } ?? []
        func make(_ lines: [String]) async throws {
            let made = try await ChildProcess.run(
                "/usr/bin/sh", ["-c", (prelude(folder.path) + lines).joined(separator: "\n")], limit: .seconds(180))
            guard made.status == 0 else { throw OCSPFixtureError("openssl could not make the test CA: \(made.output)") }
        }
        func responder(_ name: String, index: String, ca: String, signer: String) async throws -> Responder {
            let log = folder.path + "/responder-\(name).log"
            let process = try ChildProcess(
                "/usr/bin/openssl",
                ["ocsp", "-index", index, "-port", "0", "-CA", ca, "-rsigner", "\(signer).pem", "-rkey", "\(signer).key", "-ignore_err"]
                    + update, directory: folder.path, output: .file(log))
            guard let port = await listening(process, log: log) else { throw OCSPFixtureError("openssl ocsp \(name) did not start") }
            return Responder(process: process, port: port, log: log)
        }
        // The root first: the intermediate names its responder; then the leaves name theirs.
        try folder.write("ext.cnf", Array(configuration(rootPort: nil, leafPorts: [:]).utf8))
        try await make([
            "openssl req -x509 -new -key root.key -subj '/CN=OCSP Test Root' -days 30 -config ext.cnf -extensions root -out root.pem",
            "openssl req -x509 -new -key rogue.key -subj '/CN=OCSP Rogue' -days 30 -config ext.cnf -extensions root -out rogue.pem",
        ])
        let rootResponder = try await responder("root", index: "roots.txt", ca: "root.pem", signer: "root")
        try folder.write("ext.cnf", Array(configuration(rootPort: rootResponder.port, leafPorts: [:]).utf8))
        try await make([
            "issue intermediate '/CN=OCSP Test Intermediate' root 0x2001 intermediate",
            "issue responder '/CN=OCSP Test Responder' intermediate 0x3001 responder",
        ])
        let leafResponder = try await responder("leaves", index: "leaves.txt", ca: "intermediate.pem", signer: "responder")
        let rogueResponder = try await responder("rogue", index: "leaves.txt", ca: "intermediate.pem", signer: "rogue")
        let aia = [
            "good": leafResponder.port, "revoked": leafResponder.port, "unknown": leafResponder.port, "down": try freePort(),
            "rogue": rogueResponder.port,
        ]
        try folder.write("ext.cnf", Array(configuration(rootPort: rootResponder.port, leafPorts: aia).utf8))
        try await make(
            leafNames.enumerated().map { offset, name in "issue \(name) '/CN=\(name)' intermediate 0x100\(offset + 1) leaf_\(name)" })

        func certificate(_ name: String) throws -> Certificate {
            try Certificate(pem: String(contentsOfFile: folder.path + "/\(name).pem", encoding: .utf8))
        }
        var leaves: [String: (key: ECPrivateKey, certificate: Certificate)] = [:]
        for name in leafNames {
            leaves[name] = (
                try ECPrivateKey(pem: String(contentsOfFile: folder.path + "/\(name).key", encoding: .utf8)), try certificate(name)
            )
        }
        return OCSPResponderFixture(
            folder: folder, root: try certificate("root"), intermediate: try certificate("intermediate"), leaves: leaves,
            leafResponder: leafResponder, rootResponder: rootResponder, rogueResponder: rogueResponder)
    }

    private init(
        folder: TemporaryFolder, root: Certificate, intermediate: Certificate,
        leaves: [String: (key: ECPrivateKey, certificate: Certificate)],
        leafResponder: Responder, rootResponder: Responder, rogueResponder: Responder
    ) {
        self.folder = folder
        self.root = root
        self.intermediate = intermediate
        self.leaves = leaves
        self.leafResponder = leafResponder
        self.rootResponder = rootResponder
        self.rogueResponder = rogueResponder
    }

    deinit {
        let processes = [leafResponder, rootResponder, rogueResponder].map(\.process)
        // SIGKILL: `openssl ocsp` waiting in accept() outlives a SIGTERM.
        for process in processes { process.terminate(SIGKILL) }
        for process in processes { process.reap(within: .seconds(10)) }
    }

    /// A StoreKit 2 signed transaction signed by the leaf `name`, `x5c` leaf, intermediate, root.
    public func signedTransaction(by name: String, transactionID: String = "2000000000000001", productID: String = product) throws
        -> String
    {
        try jws(by: name, payload: Self.transaction(transactionID, productID: productID))
    }

    public func jws(by name: String, payload: [UInt8]) throws -> String {
        let leaf = leaves[name]!
        return try SigningChain.jws(payload: payload, key: leaf.key, x5c: [leaf.certificate, intermediate, root])
    }

    public static func transaction(_ transactionID: String, productID: String = product) -> [UInt8] {
        let object: [String: Any] = [
            "transactionId": transactionID, "originalTransactionId": transactionID, "productId": productID,
            "bundleId": bundle, "purchaseDate": 1_790_000_000_000, "type": "Non-Consumable", "environment": "Production",
            "signedDate": Date().timeIntervalSince1970 * 1000,
        ]
        return Array(try! JSONSerialization.data(withJSONObject: object))
    }

    /// A verifier trusting this CA's root, its revocation step under `policy` on `clock`.
    public func verifier(_ policy: RevocationPolicy, clock: OCSPTestClock = OCSPTestClock(), limits: OCSPRevocationChecker.Limits = .init())
        -> SignedTransactionVerifier
    {
        var verifier = SignedTransactionVerifier(root: root, bundleID: Self.bundle, environment: nil)
        verifier.revocation = OCSPRevocationChecker(policy: policy, limits: limits, now: { clock.now })
        return verifier
    }

    /// The OCSP requests a responder got, as its log names them (each logged before it is answered).
    public static func asked(_ responder: Responder) -> Int {
        let log = (try? String(contentsOfFile: responder.log, encoding: .utf8)) ?? ""
        return log.components(separatedBy: "Received request").count - 1
    }

    private static func freePort() throws -> Int {
        let (socket, port) = try LoopbackListener.open(backlog: 1)
        close(socket)
        return port
    }

    /// The port the responder logging to `log` listens on, once it says it waits for clients
    /// (within 60 s); nil when it exits or stays silent.
    private static func listening(_ process: ChildProcess, log: String) async -> Int? {
        let deadline = ContinuousClock.now + .seconds(60)
        while ContinuousClock.now < deadline, process.isRunning {
            if let text = try? String(contentsOfFile: log, encoding: .utf8), text.contains("waiting for OCSP client connections"),
                let accept = text.split(separator: "\n").first(where: { $0.hasPrefix("ACCEPT ") }),
                let address = accept.split(separator: " ").dropFirst().first,
                let port = address.split(separator: ":").last.flatMap({ Int($0) })
            {
                return port
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }

    private static func configuration(rootPort: Int?, leafPorts: [String: Int]) -> String {
        var text = """
            [req]
            distinguished_name = dn
            [dn]
            [root]
            basicConstraints = critical,CA:TRUE
            keyUsage = critical,keyCertSign,cRLSign,digitalSignature
            subjectKeyIdentifier = hash
            [intermediate]
            basicConstraints = critical,CA:TRUE,pathlen:0
            keyUsage = critical,keyCertSign,cRLSign,digitalSignature
            subjectKeyIdentifier = hash
            authorityKeyIdentifier = keyid
            authorityInfoAccess = OCSP;URI:http://127.0.0.1:\(rootPort ?? 1)/
            \(JWSVerifier.intermediateOID) = ASN1:NULL
            [responder]
            basicConstraints = critical,CA:FALSE
            keyUsage = critical,digitalSignature
            extendedKeyUsage = OCSPSigning

            """
        for (name, port) in leafPorts.sorted(by: { $0.key < $1.key }) {
            text += """
                [leaf_\(name)]
                basicConstraints = critical,CA:FALSE
                keyUsage = critical,digitalSignature
                authorityKeyIdentifier = keyid
                authorityInfoAccess = OCSP;URI:http://127.0.0.1:\(port)/
                \(JWSVerifier.leafOID) = ASN1:NULL

                """
        }
        return text
    }

    /// The shell functions the scripts share, in `folder`: `key NAME` makes a P-256 key once;
    /// `issue NAME SUBJECT ISSUER SERIAL SECTION` makes a key and a certificate the issuer signs.
    private static func prelude(_ folder: String) -> [String] {
        [
            "set -e", "cd '\(folder)'",
            "key() { [ -f \"$1.key\" ] || openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out \"$1.key\" 2>/dev/null; }",
            "issue() { key \"$1\"; openssl req -new -key \"$1.key\" -subj \"$2\" -config ext.cnf "
                + "| openssl x509 -req -CA \"$3.pem\" -CAkey \"$3.key\" -set_serial \"$4\" -days 30 "
                + "-extfile ext.cnf -extensions \"$5\" -out \"$1.pem\" 2>/dev/null; }",
            "key root", "key rogue",
        ]
    }
}

/// A clock a test moves by hand.
public final class OCSPTestClock: Sendable {
    private let current = Mutex(Date())
    public init() {}
    public var now: Date { current.withLock { $0 } }
    public func advance(_ seconds: TimeInterval) { current.withLock { $0 += seconds } }
}

public struct OCSPFixtureError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

import Foundation
import StockroomCore

/// A bucket of its own for one test, on the throwaway SeaweedFS store `.ci/s3 start` made, whose
/// endpoint and keys are in `STOCKROOM_TEST_S3*` (`make test` sets them).
///
/// Without the variables an object-storage case fails, saying so: it is never skipped in silence.
public enum ScratchBucket {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// The store's endpoint, Stockroom's identity on it, and a stranger's (which may read only a
    /// bucket named `stranger`).
    public struct Store: Sendable {
        public let endpoint: String
        public let credentials: SigV4.Credentials
        public let stranger: SigV4.Credentials

        public func settings(_ credentials: SigV4.Credentials? = nil) throws -> ObjectStoreSettings {
            try ObjectStoreSettings(endpoint: endpoint, region: "us-east-1", credentials: credentials ?? self.credentials)
        }

        /// What `stockroom serve` reads to reach the store (the AWS variables, no profile).
        public var environment: [String: String] {
            ["AWS_ACCESS_KEY_ID": credentials.accessKeyID, "AWS_SECRET_ACCESS_KEY": credentials.secretAccessKey, "AWS_REGION": "us-east-1"]
        }
    }

    public static func store() throws -> Store {
        let environment = ProcessInfo.processInfo.environment
        guard let endpoint = environment["STOCKROOM_TEST_S3"], !endpoint.isEmpty, let key = environment["STOCKROOM_TEST_S3_KEY"],
            let secret = environment["STOCKROOM_TEST_S3_SECRET"], let strangerKey = environment["STOCKROOM_TEST_S3_STRANGER_KEY"],
            let strangerSecret = environment["STOCKROOM_TEST_S3_STRANGER_SECRET"]
        else {
            throw Unavailable(
                description:
                    """
                    STOCKROOM_TEST_S3 and its keys are not set: this case needs an S3 store. Run `eval \"$(.ci/s3 start | sed \
                    's/^/export /')\"` (make test does it)
                    """
            )
        }
        return Store(
            endpoint: endpoint, credentials: .init(accessKeyID: key, secretAccessKey: secret),
            stranger: .init(accessKeyID: strangerKey, secretAccessKey: strangerSecret))
    }

    /// A new bucket with a unique name, and a client for it; the bucket is left to the store's
    /// folder, which `.ci/s3 stop` removes.
    public static func make() async throws -> (store: Store, client: S3Client) {
        let store = try store()
        let name = "test-" + UUID().uuidString.lowercased().replacingOccurrences(of: "-", with: "").prefix(24)
        let client = S3Client(settings: try store.settings(), bucket: String(name))
        try await client.createBucket()
        return (store, client)
    }
}

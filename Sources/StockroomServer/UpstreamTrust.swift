import Foundation
public import Logging
public import StockroomCore

/// What the server (and the operator commands) trust and use upstream, found once at start:
/// the root StoreKit 2 JWS must chain to, and the App Store Server API client when credentials
/// exist. Apple's root unless the upstream is the simulator, whose own root and API key are
/// trusted then and only then.
public struct UpstreamTrust: Sendable {
    public let root: Certificate
    public let serverAPI: AppStoreServerAPIClient?

    public static func discover(configuration: ServerConfiguration, logger: Logger) async throws -> UpstreamTrust {
        let simulatorBase: String? =
            switch configuration.upstream {
            case .simulator: configuration.simulatorURL
            case .url(let url): url.hasSuffix("/") ? String(url.dropLast()) : url
            case .apple: nil
            }
        let probe = CurlHTTPClient(configuration: .init(connectTimeout: .seconds(2), totalTimeout: .seconds(3), maximumResponseBytes: 64 * 1024))
        func fetch(_ path: String) async -> [UInt8]? {
            guard let simulatorBase, let response = try? await probe.send(UpstreamRequest(method: .get, url: simulatorBase + path)),
                response.status == 200
            else { return nil }
            return response.body
        }

        var root = try AppleRootCertificates.rootCAG3()
        if let pem = await fetch("/sim/root.pem"), let simulatorRoot = try? Certificate(pem: String(decoding: pem, as: UTF8.self)) {
            logger.notice("trusting the App Store simulator's root for signed transactions", metadata: ["upstream": .string(simulatorBase ?? "")])
            root = simulatorRoot
        }

        var credentials: AppStoreServerAPIClient.Credentials?
        if let path = configuration.appStoreKeyPath, let keyID = configuration.appStoreKeyID, let issuerID = configuration.appStoreIssuerID {
            guard let pem = FileManager.default.contents(atPath: path) else { throw StartupError.appStoreKey(path: path, reason: "cannot be read") }
            do {
                credentials = .init(issuerID: issuerID, keyID: keyID, bundleID: configuration.bundleID, privateKey: try ECPrivateKey(pem: String(decoding: pem, as: UTF8.self)))
            } catch {
                throw StartupError.appStoreKey(path: path, reason: "\(error)")
            }
        } else if let body = await fetch("/sim/api-key"),
            let object = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: String],
            let keyID = object["keyId"], let issuerID = object["issuerId"], let pem = object["privateKey"],
            let key = try? ECPrivateKey(pem: pem)
        {
            credentials = .init(issuerID: issuerID, keyID: keyID, bundleID: configuration.bundleID, privateKey: key)
        }
        let endpoints: AppStoreServerAPIClient.Endpoints = simulatorBase.map { .base($0) } ?? .apple
        let serverAPI = credentials.map {
            AppStoreServerAPIClient(
                credentials: $0, endpoints: endpoints, transport: CurlHTTPClient(), policy: configuration.verificationRetryPolicy, logger: logger)
        }
        return UpstreamTrust(root: root, serverAPI: serverAPI)
    }
}

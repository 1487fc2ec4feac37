import Foundation
import Hummingbird
import HummingbirdTesting
import Synchronization

/// A test client that forwards every request and, when `STOCKROOM_CONTRACT_LOG` names a file,
/// appends each exchange to it as a JSON line: `make test` then validates every recorded
/// response against `openapi.yaml` with openapi-core (`.ci/contract`), so the suites' own live
/// responses are checked against the contract by a validator.
public struct ContractRecorder: TestClientProtocol {
    public let base: any TestClientProtocol

    public init(_ base: any TestClientProtocol) {
        self.base = base
    }

    public var port: Int? { base.port }

    public func executeRequest(uri: String, method: HTTPRequest.Method, headers: HTTPFields, body: ByteBuffer?) async throws -> TestResponse
    {
        let response = try await base.executeRequest(uri: uri, method: method, headers: headers, body: body)
        ContractLog.shared?.append(method: method, uri: uri, requestHeaders: headers, response: response)
        return response
    }
}

/// The JSON-lines file of recorded exchanges; nil when `STOCKROOM_CONTRACT_LOG` is unset.
final class ContractLog: Sendable {
    static let shared: ContractLog? = ProcessInfo.processInfo.environment["STOCKROOM_CONTRACT_LOG"].flatMap(ContractLog.init)

    private let handle: Mutex<FileHandle>

    init?(path: String) {
        if !FileManager.default.fileExists(atPath: path) { _ = FileManager.default.createFile(atPath: path, contents: nil) }
        guard let handle = FileHandle(forWritingAtPath: path) else { return nil }
        handle.seekToEndOfFile()
        self.handle = Mutex(handle)
    }

    func append(method: HTTPRequest.Method, uri: String, requestHeaders: HTTPFields, response: TestResponse) {
        var headers: [String: String] = [:]
        for field in response.headers { headers[field.name.canonicalName] = field.value }
        var requestFields: [String: String] = [:]
        for field in requestHeaders { requestFields[field.name.canonicalName] = field.value }
        let entry: [String: Any] = [
            "method": method.rawValue, "uri": uri, "requestHeaders": requestFields, "status": response.status.code, "headers": headers,
            "body": Data(buffer: response.body).base64EncodedString(),
        ]
        guard var line = try? JSONSerialization.data(withJSONObject: entry, options: [.sortedKeys]) else { return }
        line.append(0x0A)
        handle.withLock { $0.write(line) }
    }
}

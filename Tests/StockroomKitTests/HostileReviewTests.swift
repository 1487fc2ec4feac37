import Foundation
import StockroomTestSupport
import Testing

@testable import StockroomKit

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

@Suite struct HostileReviewTests {
    typealias H = HostileServerTests

    // Probe: a second status line inside the head.
    @Test(arguments: TransportTests.engines)
    func probeStatusInsideHead(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 500 Internal Server Error\r\nContent-Length: 0\r\nHTTP/1.1 200 OK\r\n\r\n")]
        }
        defer { server.stop() }
        let transport = TransportTests.transport(engine, timeout: 2)
        defer { transport.invalidate() }
        let result = await transport.collect(URLRequest(url: server.url))
        print("PROBE head \(engine): \(String(describing: result.response?.statusCode)) \(String(describing: result.error))")
    }

    @Test(arguments: TransportTests.engines)
    func probeStatusInTrailer(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 500 Internal Server Error\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nHTTP/1.1 200 OK\r\n\r\n")]
        }
        defer { server.stop() }
        let transport = TransportTests.transport(engine, timeout: 2)
        defer { transport.invalidate() }
        let result = await transport.collect(URLRequest(url: server.url))
        print("PROBE trailer \(engine): \(String(describing: result.response?.statusCode)) \(String(describing: result.error))")
    }

    @Test(arguments: TransportTests.engines)
    func probeCRInHeader(_ engine: HTTPTransport.Engine) async throws {
        let server = try ScriptedHTTPServer { _ in
            [.send("HTTP/1.1 200 OK\r\nETag: \"v1\"\rX-Injected: yes\r\nX-Nul: a\u{0}b\r\nContent-Length: 0\r\n\r\n")]
        }
        defer { server.stop() }
        let transport = TransportTests.transport(engine, timeout: 2)
        defer { transport.invalidate() }
        let result = await transport.collect(URLRequest(url: server.url))
        print("PROBE cr \(engine): \(String(describing: result.response?.statusCode)) etag=\(String(reflecting: result.response?.value(forHTTPHeaderField: "ETag"))) nul=\(String(reflecting: result.response?.value(forHTTPHeaderField: "X-Nul"))) \(String(describing: result.error))")
    }
}

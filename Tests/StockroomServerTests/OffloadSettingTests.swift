import Foundation
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// `--offload*` settings, the `X-Accel-Redirect` value, and the nginx site `stockroom deploy
/// nginx` prints: every value checked, and the output accepted by `nginx -t`.
@Suite struct OffloadSettingTests {
    @Test func offloadIsOffUnlessNamed() throws {
        #expect(try ContentOffload.parse(mode: "off", prefix: nil, report: nil) == nil)
        let offload = try #require(try ContentOffload.parse(mode: "x-accel-redirect", prefix: nil, report: nil))
        #expect(offload.prefix == "/_protected/")
        #expect(offload.report == .default)
        #expect(offload.report.description == "127.0.0.1:5514")
        let custom = try #require(try ContentOffload.parse(mode: "x-accel-redirect", prefix: "/files/v1/", report: "[::1]:6000"))
        #expect(custom.prefix == "/files/v1/")
        #expect(custom.report.description == "[::1]:6000")
    }

    @Test(arguments: ["sendfile", "X-Accel-Redirect", ""])
    func anUnknownModeIsRefused(_ mode: String) {
        #expect(throws: OffloadSettingError.mode(mode)) { try ContentOffload.parse(mode: mode, prefix: nil, report: nil) }
    }

    @Test(arguments: ["_protected/", "/_protected", "/", "//", "/a b/", "/a;b/", "/$x/", "/../", "/a/./", "/a//b/", "/é/"])
    func aPrefixNginxCouldMisreadIsRefused(_ prefix: String) {
        #expect(throws: OffloadSettingError.prefix(prefix)) {
            try ContentOffload.parse(mode: "x-accel-redirect", prefix: prefix, report: nil)
        }
    }

    @Test(arguments: [
        "0.0.0.0:5514", "10.0.0.1:5514", "localhost:5514", "127.0.0.1", "127.0.0.1:0", "127.0.0.1:65536", "::1:5514", "127.0.0.1:+1", "",
    ])
    func aReportAddressOffLoopbackOrMalformedIsRefused(_ text: String) {
        #expect(throws: OffloadSettingError.report(text)) { try OffloadReportAddress(parsing: text) }
    }

    @Test func theRedirectNamesTheFileWithEveryUnsafeBytePercentEncoded() {
        #expect(
            AccelRedirect.target(prefix: "/_protected/", relativePath: "books/field-guide.epub") == "/_protected/books/field-guide.epub")
        #expect(AccelRedirect.target(prefix: "/p/", relativePath: "a b?#%é.bin") == "/p/a%20b%3F%23%25%C3%A9.bin")
        #expect(AccelRedirect.target(prefix: "/p/", relativePath: "a\r\nX-Evil: 1") == "/p/a%0D%0AX-Evil%3A%201")
        for unsafe in ["", "/etc/passwd", "a/../b", "./a", "a//b", "a/", "a\u{0}b"] {
            #expect(AccelRedirect.target(prefix: "/p/", relativePath: unsafe) == nil, "\(unsafe)")
        }
        #expect(AccelRedirect.relativePath(of: "/srv/content/books/a.epub", inside: "/srv/content") == "books/a.epub")
        #expect(AccelRedirect.relativePath(of: "/srv/contents/a.epub", inside: "/srv/content") == nil)
        #expect(AccelRedirect.relativePath(of: "/srv/content", inside: "/srv/content") == nil)
    }

    @Test(arguments: [
        ("--listen", "80; include /etc/passwd"), ("--listen", "127.0.0.1:0"), ("--listen", "::1:80"), ("--listen", "host:80 ssl"),
        ("--stockroom", "ftp://127.0.0.1:8080"), ("--stockroom", "http://127.0.0.1:8080/api"), ("--stockroom", "http://a b:80"),
        ("--stockroom", "http://127.0.0.1:99999"), ("--content", "relative/content"), ("--content", "/srv/con tent"),
        ("--content", "/srv/content;"), ("--content", "/srv/$document_root"), ("--content", "/srv/{x}"), ("--content", "/srv/'x'"),
        ("--content", "/srv/#x"), ("--content", "/srv/\nx"),
    ])
    func aValueThatWouldChangeNginxsConfigurationIsRefused(_ flag: String, _ value: String) {
        #expect(throws: NginxSiteError.value(flag: flag, value)) {
            _ = try NginxSite(
                listen: flag == "--listen" ? value : "443", stockroom: flag == "--stockroom" ? value : "http://127.0.0.1:8080",
                contentFolder: flag == "--content" ? value : "/srv/stockroom/content")
        }
    }

    @Test func theSiteProxiesEverythingAndSendsContentFromAnInternalAlias() throws {
        let site = try NginxSite(
            listen: "0.0.0.0:8443", stockroom: "http://127.0.0.1:8080/", contentFolder: "/srv/stockroom/content/",
            report: try OffloadReportAddress(parsing: "127.0.0.1:6514"))
        let text = site.httpInclude
        #expect(text.contains("server 127.0.0.1:8080;"))
        #expect(text.contains("proxy_pass http://stockroom;"))
        #expect(text.contains("location /_protected/ {\n        internal;\n        alias /srv/stockroom/content/;"))
        #expect(text.contains("sendfile on;"))
        #expect(text.contains("access_log syslog:server=127.0.0.1:6514,tag=stockroom,nohostname stockroom_delivery;"))
        #expect(text.contains(NginxSite.logFormat))
        #expect(text.contains("listen 0.0.0.0:8443;"))
        #expect(!text.contains("ssl"))
    }

    @Test func severalInstancesShareOneUpstreamOfOneScheme() throws {
        let site = try NginxSite(
            listen: "8443", stockrooms: ["http://10.0.0.1:8081", "http://10.0.0.2:8081/"], contentFolder: "/srv/content")
        #expect(site.httpInclude.contains("upstream stockroom {\n    server 10.0.0.1:8081;\n    server 10.0.0.2:8081;\n    keepalive 32;"))
        #expect(throws: NginxSiteError.self) {
            try NginxSite(listen: "8443", stockrooms: ["http://10.0.0.1:8081", "https://10.0.0.2:8443"], contentFolder: "/srv/content")
        }
        #expect(throws: NginxSiteError.self) { try NginxSite(listen: "8443", stockrooms: [], contentFolder: "/srv/content") }
    }

    @Test func nginxAcceptsTheSiteWithAndWithoutTLS() async throws {
        let folder = try TemporaryFolder()
        let certificate = folder.path + "/cert.pem", key = folder.path + "/key.pem"
        let openssl = try await ChildProcess.run(
            "/usr/bin/openssl",
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=stockroom.test",
                "-days", "1",
                "-keyout", key, "-out", certificate,
            ])
        try #require(openssl.status == 0, "openssl: \(openssl.output)")
        let executable = try #require(NginxProcess.executable, "nginx is not installed: .ci/install-deps installs nginx-light")
        let sites = [
            try NginxSite(listen: "127.0.0.1:18443", stockroom: "http://127.0.0.1:8080", contentFolder: folder.path),
            try NginxSite(
                listen: "127.0.0.1:18443", stockroom: "https://[::1]", contentFolder: folder.path, offloadPrefix: "/files/",
                tls: .init(certificate: certificate, key: key)),
            // Two instances sharing a PostgreSQL ledger.
            try NginxSite(
                listen: "127.0.0.1:18443", stockrooms: ["http://127.0.0.1:8081", "http://127.0.0.1:8082"], contentFolder: folder.path),
        ]
        for site in sites {
            try folder.write("stockroom.conf", site.httpInclude)
            try folder.write("nginx.conf", NginxProcess.mainConfiguration(including: folder.path + "/stockroom.conf", in: folder.path))
            let test = try await ChildProcess.run(
                executable, ["-t", "-q", "-p", folder.path, "-c", folder.path + "/nginx.conf", "-e", folder.path + "/error.log"])
            #expect(test.status == 0, "nginx -t: \(test.output)")
        }
    }

    @Test func theCheckedInDeployFileIsWhatTheCommandPrintsForTheExamplePaths() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let checkedIn = try String(contentsOf: root.appendingPathComponent("deploy/nginx.conf"), encoding: .utf8)
        let site = try NginxSite(
            listen: "443", stockroom: "http://127.0.0.1:8080", contentFolder: "/srv/stockroom/content",
            tls: .init(certificate: "/etc/ssl/stockroom/fullchain.pem", key: "/etc/ssl/stockroom/privkey.pem"))
        #expect(checkedIn == site.httpInclude, "regenerate deploy/nginx.conf with stockroom deploy nginx (README, Behind nginx)")
    }
}

import ArgumentParser
import Foundation
import StockroomServer

/// `stockroom deploy`: prints configuration for what runs around Stockroom.
struct DeployCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "deploy",
        abstract: "Print configuration for the software in front of Stockroom.",
        subcommands: [DeployNginxCommand.self]
    )
}

/// `stockroom deploy nginx`: the nginx site that sends content for `serve --offload`.
struct DeployNginxCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "nginx",
        abstract: "Print an nginx site that proxies to Stockroom and sends its content files.",
        discussion: """
            The output is one file for nginx's http { } block, not a whole nginx.conf: the \
            log_format of the delivery reports (valid only at http level), an upstream for \
            Stockroom, and the server { } block. On Debian, save it as \
            /etc/nginx/conf.d/stockroom.conf, which nginx.conf includes inside http { }.

            The server proxies everything to Stockroom, and serves an internal location aliased \
            to --content with sendfile: Stockroom answers an authorised download with its headers \
            and X-Accel-Redirect, nginx sends the bytes and handles Range, and reports how each \
            download ended over syslog to --report, where Stockroom records the delivery. Run \
            Stockroom with the same values, and name nginx as its trusted proxy so that its \
            per-client limits count the address nginx saw (127.0.0.1 when Stockroom runs on this \
            machine; the printed file says which):

              stockroom serve --offload x-accel-redirect --offload-prefix /_protected/ \\
                  --offload-report 127.0.0.1:5514 --trusted-proxy 127.0.0.1

            /metrics is not proxied (Prometheus scrapes Stockroom itself, or --metrics-address), \
            and /openapi.json, /v1/admin/ and /console answer this machine only: add an allow line \
            for each operator network.
            """
    )

    @Option(help: ArgumentHelp("Where nginx listens: ADDR:PORT, [IPv6]:PORT or PORT.", valueName: "addr:port"))
    var listen: String

    @Option(
        help: ArgumentHelp(
            """
            Stockroom's URL as nginx reaches it, e.g. http://127.0.0.1:8080; repeat it for several instances sharing one PostgreSQL \
            ledger.
            """,
            valueName: "url"))
    var stockroom: [String]

    @Option(help: ArgumentHelp("The content folder, as Stockroom's --content (made absolute).", valueName: "dir"))
    var content: String

    @Option(help: ArgumentHelp("The internal location's URI prefix, as Stockroom's --offload-prefix.", valueName: "prefix"))
    var offloadPrefix: String = ContentOffload.defaultPrefix

    @Option(help: ArgumentHelp("Where nginx reports deliveries, as Stockroom's --offload-report (loopback).", valueName: "addr:port"))
    var report: String = OffloadReportAddress.default.description

    @Option(help: ArgumentHelp("TLS certificate chain (PEM); with --tls-key, nginx serves HTTPS.", valueName: "file"))
    var tlsCert: String?

    @Option(help: ArgumentHelp("TLS private key (PEM), with --tls-cert.", valueName: "file"))
    var tlsKey: String?

    func validate() throws {
        guard (tlsCert == nil) == (tlsKey == nil) else { throw ValidationError("--tls-cert and --tls-key go together") }
    }

    func run() throws {
        do {
            var tls: NginxSite.TLSFiles?
            if let tlsCert, let tlsKey { tls = NginxSite.TLSFiles(certificate: Self.absolute(tlsCert), key: Self.absolute(tlsKey)) }
            let site = try NginxSite(
                listen: listen, stockrooms: stockroom, contentFolder: Self.absolute(content), offloadPrefix: offloadPrefix,
                report: try OffloadReportAddress(parsing: report), tls: tls)
            print(site.httpInclude, terminator: "")
        } catch let error as NginxSiteError {
            fail(error.description, code: 64)
        } catch let error as OffloadSettingError {
            fail(error.description.replacingOccurrences(of: "--offload-report", with: "--report"), code: 64)
        }
    }

    /// `path` made absolute against the working directory, as nginx's alias needs.
    private static func absolute(_ path: String) -> String {
        URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath, isDirectory: true))
            .standardizedFileURL.path
    }
}

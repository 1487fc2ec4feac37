/// The nginx configuration that fronts Stockroom with `--offload x-accel-redirect`: TLS
/// optional, everything proxied to Stockroom, and an `internal` location aliased to the content
/// folder from which nginx sends authorised files with sendfile and reports each delivery.
///
/// `stockroom deploy nginx` prints `httpInclude`; the offload tests run nginx on it. Every value
/// is checked (`NginxSiteSetting`) before it is written, so none can add a directive.
public struct NginxSite: Sendable, Equatable {
    /// The certificate chain and key files nginx serves TLS with.
    public struct TLSFiles: Sendable, Equatable {
        public var certificate: String
        public var key: String

        public init(certificate: String, key: String) {
            self.certificate = certificate
            self.key = key
        }
    }

    /// nginx's `listen`: `ADDR:PORT`, `[v6]:PORT` or `PORT`.
    public let listen: String
    /// Stockroom's `host:port`, from the URL given.
    /// Each Stockroom instance nginx balances over (`--stockroom`, repeatable), as host:port.
    public let stockroomAuthorities: [String]
    public let stockroomScheme: String
    /// The content folder, absolute, without a trailing `/`.
    public let contentFolder: String
    public let offloadPrefix: String
    public let report: OffloadReportAddress
    public let tls: TLSFiles?

    /// Checks every value; `stockroom` is `http(s)://host[:port]` with no path.
    public init(
        listen: String, stockroom: String, contentFolder: String, offloadPrefix: String = ContentOffload.defaultPrefix,
        report: OffloadReportAddress = .default, tls: TLSFiles? = nil
    ) throws(NginxSiteError) {
        try self.init(
            listen: listen, stockrooms: [stockroom], contentFolder: contentFolder, offloadPrefix: offloadPrefix, report: report, tls: tls)
    }

    /// The same for several instances sharing one ledger (PostgreSQL): nginx balances over them,
    /// and every one of them may send the file. They share one scheme.
    public init(
        listen: String, stockrooms: [String], contentFolder: String, offloadPrefix: String = ContentOffload.defaultPrefix,
        report: OffloadReportAddress = .default, tls: TLSFiles? = nil
    ) throws(NginxSiteError) {
        self.listen = try NginxSiteSetting.listen(listen)
        guard let first = stockrooms.first, stockrooms.count <= 64 else { throw .value(flag: "--stockroom", stockrooms.first ?? "") }
        var upstreams: [(scheme: String, authority: String)] = []
        for url in stockrooms { upstreams.append(try NginxSiteSetting.upstream(url)) }
        guard upstreams.allSatisfy({ $0.scheme == upstreams[0].scheme }) else { throw .value(flag: "--stockroom", first) }
        self.stockroomScheme = upstreams[0].scheme
        self.stockroomAuthorities = upstreams.map(\.authority)
        self.contentFolder = try NginxSiteSetting.absolutePath(contentFolder, flag: "--content")
        guard ContentOffload.isValidPrefix(offloadPrefix) else { throw .value(flag: "--offload-prefix", offloadPrefix) }
        self.offloadPrefix = offloadPrefix
        self.report = report
        if let tls {
            self.tls = TLSFiles(
                certificate: try NginxSiteSetting.absolutePath(tls.certificate, flag: "--tls-cert"),
                key: try NginxSiteSetting.absolutePath(tls.key, flag: "--tls-key"))
        } else {
            self.tls = nil
        }
    }

    /// The format name the internal location logs with.
    public static let logFormatName = "stockroom_delivery"

    /// The `log_format` the delivery reports use: valid only at `http {}` level. Its message is
    /// what `DeliveryLogLine.parse` reads.
    public static var logFormat: String {
        "log_format \(logFormatName) '\(DeliveryLogLine.marker)tx=$upstream_http_x_transaction_id method=$request_method "
            + "status=$status sent=$body_bytes_sent completion=$request_completion range=$sent_http_content_range';"
    }

    /// The whole file for nginx's `http {}` block (Debian: `/etc/nginx/conf.d/stockroom.conf`):
    /// the `log_format`, the `upstream`, and the `server`.
    public var httpInclude: String {
        """
        # Stockroom behind nginx, printed by `stockroom deploy nginx`. Include this file inside nginx's
        # http { } block (Debian: /etc/nginx/conf.d/stockroom.conf): log_format and upstream are valid
        # only there. Run Stockroom with:
        #   stockroom serve --offload x-accel-redirect --offload-prefix \(offloadPrefix) --offload-report \(report) \\
        #     --trusted-proxy \(trustedProxy)
        # --trusted-proxy names the address this nginx connects to Stockroom from, so Stockroom counts
        # each client by the X-Forwarded-For entry nginx adds\(trustedProxyNote).

        # One syslog line per offloaded download, received by Stockroom's --offload-report listener.
        \(Self.logFormat)

        upstream stockroom {
            \(stockroomAuthorities.map { "server \($0);" }.joined(separator: "\n    "))
            keepalive 32;
            # Shorter than Stockroom's --idle-timeout (60s), so nginx never reuses a connection
            # Stockroom is closing.
            keepalive_timeout 50s;
        }

        \(serverBlock)
        """
    }

    /// The proxying shared by every location that reaches Stockroom, indented for a location.
    var proxyLines: String {
        """
                proxy_pass \(stockroomScheme)://stockroom;
                proxy_http_version 1.1;
                proxy_set_header Connection "";
                proxy_set_header Host $host;
                # Stockroom reads the last address here, from a --trusted-proxy peer only, for its per-client limits.
                proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
                proxy_set_header X-Forwarded-Proto $scheme;
                proxy_buffering off;
                proxy_request_buffering off;
                proxy_read_timeout 300s;
        """
    }

    /// The `--trusted-proxy` Stockroom needs: the loopback address nginx reaches it from when every
    /// instance is on this machine; otherwise this host's address on Stockroom's network.
    public var trustedProxy: String {
        if stockroomAuthorities.allSatisfy({ $0.hasPrefix("[::1]") }) { return "::1" }
        if stockroomAuthorities.allSatisfy({ Self.isLoopbackAuthority($0) }) { return "127.0.0.1" }
        return "<this nginx host's address>"
    }

    private var trustedProxyNote: String {
        trustedProxy.hasPrefix("<") ? " (Stockroom runs on another host: name the address this nginx host reaches it from)" : ""
    }

    private static func isLoopbackAuthority(_ authority: String) -> Bool {
        let host = authority.hasPrefix("[") ? String(authority.prefix { $0 != "]" }.dropFirst()) : String(authority.prefix { $0 != ":" })
        return LoopbackHost.contains(host)
    }

    /// The `server { }` block alone.
    public var serverBlock: String {
        let listenLine = tls == nil ? "listen \(listen);" : "listen \(listen) ssl;"
        let tlsLines =
            tls.map {
                """

                    ssl_certificate     \($0.certificate);
                    ssl_certificate_key \($0.key);
                    ssl_protocols       TLSv1.2 TLSv1.3;
                """
            } ?? ""
        return """
            server {
                \(listenLine)\(tlsLines)

                client_max_body_size 1m;          # receipts and JSON only; Stockroom answers 413 past 1 MiB
                client_header_timeout 10s;        # as Stockroom's --header-timeout, for the public side
                client_body_timeout 10s;
                keepalive_timeout 60s;            # as Stockroom's --idle-timeout

                # Everything public is Stockroom's: the catalogue, every decision, every refusal (its JSON).
                location / {
            \(proxyLines)
                }

                # Operator surfaces stay off the public side. Prometheus scrapes Stockroom itself (on its
                # loopback port, or --metrics-address); the contract is served to this machine only.
                location = /metrics { return 404; }
                location = /openapi.json {
                    allow 127.0.0.1;
                    allow ::1;
                    deny all;
            \(proxyLines)
                }
                # The admin API and the web console (each behind STOCKROOM_ADMIN_TOKEN too): from this
                # machine only; add an `allow` line for each operator network before `deny all`.
                location ^~ /v1/admin/ {
                    allow 127.0.0.1;
                    allow ::1;
                    deny all;
            \(proxyLines)
                }
                location ^~ /console {
                    allow 127.0.0.1;
                    allow ::1;
                    deny all;
            \(proxyLines)
                }

                # An authorised download: Stockroom answers with its headers and
                # X-Accel-Redirect: \(offloadPrefix)<file>, and nginx sends the file from here.
                # Clients cannot ask for it directly (internal).
                location \(offloadPrefix) {
                    internal;
                    alias \(contentFolder)/;
                    sendfile on;
                    tcp_nopush on;
                    # nginx answers Range and If-Range against Stockroom's ETag; several ranges get
                    # the whole file, as from Stockroom; no Last-Modified, so a date never matches.
                    max_ranges 1;
                    etag off;
                    if_modified_since off;
                    add_header Last-Modified "";
                    # nginx keeps Content-Type and Cache-Control of Stockroom's answer; these it copies.
                    add_header ETag $upstream_http_etag;
                    add_header Repr-Digest $upstream_http_repr_digest;
                    add_header X-Transaction-Id $upstream_http_x_transaction_id;
                    add_header X-Download-Token $upstream_http_x_download_token;
                    add_header Location $upstream_http_location;
                    # How each download ended, for the ledger (add a file access_log here too if wanted).
                    access_log syslog:server=\(report),tag=stockroom,nohostname \(Self.logFormatName);
                }
            }

            """
    }
}

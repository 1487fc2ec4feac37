import Hummingbird
import Prometheus
import StockroomCore

/// `GET /healthz` (liveness, with the catalogue version served), `GET /metrics` (Prometheus) and
/// `GET /openapi.json` (the contract).
///
/// `/metrics` carries aggregates only (no transaction, product or address is a label); the
/// gauges that describe state (ledger rows by state, downloads in flight) are read at each scrape.
struct HealthController<Context: RequestContext> {
    let catalog: CatalogStore
    let metrics: PrometheusCollectorRegistry
    let ledger: any Ledger
    let slots: DownloadSlots

    /// `withMetrics` false leaves `/metrics` to the listener of `--metrics-address`.
    func addRoutes(to router: Router<Context>, withMetrics: Bool = true) {
        router.get("healthz", use: health)
        if withMetrics { addMetricsRoute(to: router) }
        router.get("openapi.json", use: contract)
    }

    /// `/metrics` alone.
    func addMetricsRoute(to router: Router<Context>) {
        router.get("metrics", use: exposition)
    }

    /// The API contract (`openapi.yaml`, as JSON).
    @Sendable func contract(_ request: Request, context: Context) async throws -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "public, max-age=300"],
            body: .init(byteBuffer: ByteBuffer(string: OpenAPIDocument.json)))
    }

    @Sendable func health(_ request: Request, context: Context) async throws -> Response {
        let current = catalog.catalog
        let body = #"{"status":"ok","catalogVersion":"\#(current.version)","products":\#(current.products.count)}"#
        return Response(
            status: .ok,
            headers: [.contentType: "application/json; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(string: body)))
    }

    @Sendable func exposition(_ request: Request, context: Context) async throws -> Response {
        StockroomMetrics.downloadsInFlight(slots.inUse)
        // A ledger that cannot answer leaves the last counts in place: the scrape still succeeds.
        if let counts = try? await ledger.stateCounts() { StockroomMetrics.ledgerRows(counts) }
        var buffer: [UInt8] = []
        metrics.emit(into: &buffer)
        return Response(
            status: .ok,
            headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8", .cacheControl: "no-store"],
            body: .init(byteBuffer: ByteBuffer(bytes: buffer)))
    }
}

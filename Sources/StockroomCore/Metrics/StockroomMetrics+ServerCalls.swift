import Metrics

extension StockroomMetrics {
    /// `stockroom_server_calls_total{kind, outcome}`: calls owed to the App Store Server API as
    /// the sender settled them. `kind`: finish, consumption, appAccountToken; `outcome`: sent, retry, refused, skipped.
    public static func serverCall(kind: ServerCall.Kind, result: ServerCallResult) {
        let outcome =
            switch result {
            case .sent: "sent"
            case .retry: "retry"
            case .refused: "refused"
            case .skipped: "skipped"
            }
        serverCallCounter(kind, outcome).increment()
    }

    /// Shows every series at zero from the start, so a dashboard has a line before the first call.
    public static func registerServerCalls() {
        for kind in ServerCall.Kind.allCases {
            for outcome in ["sent", "retry", "refused", "skipped"] { serverCallCounter(kind, outcome).increment(by: 0) }
        }
    }

    private static func serverCallCounter(_ kind: ServerCall.Kind, _ outcome: String) -> Counter {
        Counter(label: "stockroom_server_calls_total", dimensions: [("kind", kind.rawValue), ("outcome", outcome)])
    }
}

import StockroomCore

/// Posts minted notifications to the URL set (`PUT /sim/notification-url`) and records each
/// attempt's result for Get Notification History.
struct NotificationPoster: Sendable {
    let state: SimulatorState
    /// The time limit of one post; Apple gives a server a few seconds too.
    static let timeout: Duration = .seconds(5)

    /// Posts `notification` once when a URL is set. Returns what `X-Notification-Status`
    /// reports: the HTTP status, or `failed`; nil when no URL is set (nothing posted).
    func deliver(_ notification: SimulatedNotification) async throws(SimulatorError) -> String? {
        guard let url = await state.notificationURL else { return nil }
        let body = try await state.postBody(of: notification)
        do throws(UpstreamError) {
            let response = try await CurlHTTPClient(configuration: .init(totalTimeout: Self.timeout))
                .send(UpstreamRequest(method: .post, url: url, headers: [("Content-Type", "application/json")], body: body))
            await state.recordAttempt(
                notification.uuid, result: SimulatedNotification.sendAttemptResult(status: response.status, error: nil))
            return String(response.status)
        } catch {
            await state.recordAttempt(notification.uuid, result: SimulatedNotification.sendAttemptResult(status: nil, error: error))
            return "failed"
        }
    }
}

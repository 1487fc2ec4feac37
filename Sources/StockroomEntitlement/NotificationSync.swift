import Foundation
import StockroomCore

/// Reconciles the ledger with Apple's Get Notification History: every notification Apple sent
/// (or failed to send) in a window is applied once, by UUID, exactly as if it had been posted.
/// A notification the server already recorded is a duplicate and changes nothing, so the sync
/// can run as often as wanted (a systemd timer runs it hourly).
///
/// See https://developer.apple.com/documentation/appstoreserverapi/get-notification-history
public struct NotificationSync: Sendable {
    /// How far a sync got, for its progress line.
    public struct Progress: Sendable, Equatable {
        public var environment: StoreEnvironment
        public var pages = 0
        public var seen = 0
        public var applied = 0
        public var duplicates = 0
        public var refused = 0
        /// What applied notifications did ("revoked", "entitled", …), counted.
        public var effects: [String: Int] = [:]
        /// How much of the window the notifications seen so far cover, 0…1 (Apple pages oldest first).
        public var covered: Double = 0

        public init(environment: StoreEnvironment) {
            self.environment = environment
        }
    }

    /// Why a sync stopped before the history's end.
    public enum Failure: Error, Sendable, Equatable, CustomStringConvertible {
        case upstream(ServerAPIFailure)
        case tooManyPages(Int)

        public var description: String {
            switch self {
            case .upstream(.unavailable(let reason, _)): "the App Store Server API is unavailable: \(reason)"
            case .upstream(.refused(let status, let code, let reason)):
                "the App Store Server API refused the request (HTTP \(status)\(code.map { ", \($0)" } ?? "")): \(reason)"
            case .tooManyPages(let pages): "stopped after \(pages) pages: the history did not end"
            }
        }
    }

    /// A bound on pages followed: a history that never ends (or a hostile upstream) stops here.
    public static let maximumPages = 10_000

    let entitlements: Entitlements
    let client: AppStoreServerAPIClient

    public init(entitlements: Entitlements, client: AppStoreServerAPIClient) {
        self.entitlements = entitlements
        self.client = client
    }

    /// Pages through `environment`'s history for `query`, applying each notification; `report`
    /// hears after every page. Throws `Failure` when a page cannot be had (what was applied stays).
    public func run(
        _ query: NotificationHistoryQuery, environment: StoreEnvironment, report: (Progress) -> Void = { _ in }
    ) async throws -> Progress {
        var progress = Progress(environment: environment)
        var token: String?
        repeat {
            guard progress.pages < Self.maximumPages else { throw Failure.tooManyPages(progress.pages) }
            let page: NotificationHistoryPage
            switch await client.notificationHistory(query, paginationToken: token, environment: environment) {
            case .success(let answer): page = answer
            case .failure(let failure): throw Failure.upstream(failure)
            }
            progress.pages += 1
            for payload in page.signedPayloads {
                progress.seen += 1
                if let signed = Self.signedDate(of: payload) {
                    let span = query.end.timeIntervalSince(query.start)
                    let share = span > 0 ? signed.timeIntervalSince(query.start) / span : 1
                    progress.covered = max(progress.covered, min(max(share, 0), 1))
                }
                switch try await entitlements.apply(notification: payload, source: .history) {
                case .recorded(let effect):
                    progress.applied += 1
                    progress.effects[effect, default: 0] += 1
                case .duplicate: progress.duplicates += 1
                case .refused: progress.refused += 1
                }
            }
            report(progress)
            token = page.hasMore ? page.paginationToken : nil
        } while token != nil
        progress.covered = 1
        report(progress)
        return progress
    }

    /// When Apple signed a notification, read from its payload without verifying it: for the
    /// progress bar only (`apply` verifies before anything is decided).
    static func signedDate(of payload: String) -> Date? {
        let parts = payload.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].utf8.count <= 64 * 1024 else { return nil }
        var text = parts[1].replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while text.utf8.count % 4 != 0 { text += "=" }
        struct Payload: Decodable { var signedDate: Double }
        guard let data = Data(base64Encoded: text), JSONNesting.isShallow(data),
            let milliseconds = try? JSONDecoder().decode(Payload.self, from: data).signedDate, milliseconds.isFinite,
            (0...1e15).contains(milliseconds)
        else { return nil }
        return Date(timeIntervalSince1970: milliseconds / 1000)
    }
}

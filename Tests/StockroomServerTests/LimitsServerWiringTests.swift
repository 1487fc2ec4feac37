import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import StockroomCore
import StockroomTestSupport
import Testing
@testable import StockroomServer

/// The limits of the configuration, as the live server applies them through the entitlement
/// component: the per-address upstream rate and the sandbox policy.
@Suite struct LimitsServerWiringTests {
    @Test func aClientPastItsUpstreamAllowanceGets429WhileItsVerifiedDownloadsGoOn() async throws {
        try await DownloadFixture.run({ $0.upstreamRate = UpstreamRate(requests: 2, per: .seconds(3600)) }) { fixture in
            let first = try await fixture.control.purchase(DownloadFixture.book)
            let second = try await fixture.control.purchase(DownloadFixture.book)
            let third = try await fixture.control.purchase(DownloadFixture.book)
            let served = try await fixture.post(first)
            #expect(served.status == .ok)
            #expect(try await fixture.post(second).status == .ok)
            let before = try await fixture.snapshot()

            let limited = try await fixture.post(third)
            #expect(limited.status == .tooManyRequests)
            #expect(try DownloadFixture.code(limited) == "rate_limited")
            let retryAfter = try #require(limited.headers[.retryAfter].flatMap { Int($0) })
            #expect((1...1800).contains(retryAfter), "one request each 30 minutes: \(retryAfter)")
            #expect(try await fixture.snapshot() == before, "a limited request changes nothing")
            #expect(try await fixture.control.calls().total == 2, "the limited request never reached the App Store")

            // What needs no upstream call is not limited: a repeat of a verified claim, a resume.
            #expect(try await fixture.post(first).status == .ok)
            let token = try #require(served.headers[.init("X-Download-Token")!])
            let resume = try await fixture.get(
                "/v1/downloads/\(first.transactionId)/content", token: token, headers: [.range: "bytes=0-99"])
            #expect(resume.status == .partialContent)
        }
    }

    @Test func sandboxPurchasesAreRefusedWhenTheOperatorDeniesThem() async throws {
        try await DownloadFixture.run({ $0.sandbox = .deny }) { fixture in
            let review = try await fixture.control.purchase(DownloadFixture.book, environment: "Sandbox")
            let refused = try await fixture.post(review)
            #expect(refused.status == .forbidden)
            #expect(try DownloadFixture.code(refused) == "sandbox_not_allowed")
            #expect(try await fixture.ledger.fulfilment(review.transactionId) == nil)
            let customer = try await fixture.control.purchase(DownloadFixture.book)
            #expect(try await fixture.post(customer).status == .ok, "production purchases are served")
        }
    }

    @Test func sandboxPurchasesAreServedByDefault() async throws {
        try await DownloadFixture.run { fixture in
            let review = try await fixture.control.purchase(DownloadFixture.book, environment: "Sandbox")
            #expect(try await fixture.post(review).status == .ok)
        }
    }
}

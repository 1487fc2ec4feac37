import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Testing

extension DownloadFixture {
    /// `POST /v1/admin/pending-proofs/refulfil`: expects 202 with a job at `Location`, then polls
    /// `GET /v1/admin/jobs/{id}` (up to 30 s) until it is done; returns the finished job.
    func refulfilPendingJob(token: String, dryRun: Bool = false) async throws -> [String: Any] {
        let started = try await admin(.post, "pending-proofs/refulfil" + (dryRun ? "?dryRun=true" : ""), token: token)
        #expect(started.status == .accepted)
        let job = try Self.json(started)
        let id = try #require(job["id"] as? String)
        #expect(started.headers[.location] == "/v1/admin/jobs/\(id)")
        return try await finishedJob(id, token: token)
    }

    /// Polls the job `id` until it is done or failed (up to 30 s).
    func finishedJob(_ id: String, token: String) async throws -> [String: Any] {
        let deadline = ContinuousClock.now + .seconds(30)
        while true {
            let response = try await admin(.get, "jobs/\(id)", token: token)
            #expect(response.status == .ok)
            let job = try Self.json(response)
            if ["done", "failed"].contains(job["state"] as? String ?? "") || ContinuousClock.now > deadline { return job }
            try await Task.sleep(for: .milliseconds(25))
        }
    }
}

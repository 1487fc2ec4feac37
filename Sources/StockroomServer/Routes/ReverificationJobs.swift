import Foundation
import Hummingbird
import Logging
import ServiceLifecycle
import StockroomCore
import StockroomEntitlement
import Synchronization

/// Re-fulfilment of the kept pending proofs as a job, run apart from the request that asked
/// for it: `POST /v1/admin/pending-proofs/refulfil` answers at once with the job, and the
/// operator polls `GET /v1/admin/jobs/{id}` for its progress and, when done, its outcomes.
///
/// One job at a time per instance (instances sharing a ledger lease the proofs, so each proof
/// is still verified once). The last few jobs are remembered in memory only; a restart forgets
/// them, and proofs a stopped job held are leased again when their lease runs out.
final class ReverificationJobs: Service, Sendable, CustomStringConvertible {
    let entitlements: Entitlements
    let logger: Logger
    private let jobs = Mutex([Job]())
    private let requests: AsyncStream<String>
    private let continuation: AsyncStream<String>.Continuation
    /// Finished jobs remembered, newest kept.
    static let remembered = 8
    /// Outcomes shown per job; the counts cover them all.
    static let shownResults = 1000

    var description: String { "ReverificationJobs" }

    init(entitlements: Entitlements, logger: Logger) {
        self.entitlements = entitlements
        self.logger = logger
        let (requests, continuation) = AsyncStream.makeStream(of: String.self)
        self.requests = requests
        self.continuation = continuation
    }

    /// A re-fulfilment job, as the admin API shows it.
    struct Job: Sendable {
        enum Phase: String, Sendable {
            case queued, running, done, failed
        }

        var id: String
        var dryRun: Bool
        var phase: Phase = .queued
        var createdAt: Date
        var startedAt: Date?
        var finishedAt: Date?
        /// Kept proofs taken by the job, and how many of them are settled.
        var total = 0
        var done = 0
        var results: [Reverification] = []
        var error: String?

        var isActive: Bool { phase == .queued || phase == .running }

        /// As `GET /v1/admin/jobs/{id}` shows it; the outcomes once it is done.
        var view: View {
            let done = phase == .done
            return View(
                id: id, kind: "refulfil-pending", dryRun: dryRun, state: phase.rawValue, createdAt: OperatorJSON.date(createdAt),
                total: total, done: self.done, startedAt: startedAt.map(OperatorJSON.date), finishedAt: finishedAt.map(OperatorJSON.date),
                error: error, counts: done ? Dictionary(grouping: results, by: \.kind.rawValue).mapValues(\.count) : nil,
                results: done ? Array(results.prefix(ReverificationJobs.shownResults)) : nil,
                resultsTruncated: done ? results.count > ReverificationJobs.shownResults : nil)
        }

        /// Names are the JSON keys.
        struct View: ResponseEncodable {
            var id: String
            var kind: String
            var dryRun: Bool
            var state: String
            var createdAt: String
            var total: Int
            var done: Int
            var startedAt: String?
            var finishedAt: String?
            var error: String?
            var counts: [String: Int]?
            var results: [Reverification]?
            var resultsTruncated: Bool?
        }
    }

    /// What asking for a job came to.
    enum Start {
        case started(Job)
        /// One is queued or running already: this one.
        case busy(Job)
    }

    /// Queues a job unless one is queued or running.
    func start(dryRun: Bool, now: Date = Date()) -> Start {
        jobs.withLock { jobs in
            if let active = jobs.last(where: \.isActive) { return .busy(active) }
            let job = Job(id: UUID().uuidString.lowercased(), dryRun: dryRun, createdAt: now)
            jobs.append(job)
            if jobs.count > Self.remembered + 1 { jobs.removeFirst(jobs.count - Self.remembered - 1) }
            continuation.yield(job.id)
            return .started(job)
        }
    }

    /// The job `id`, as it stands now.
    func job(_ id: String) -> Job? {
        jobs.withLock { jobs in jobs.first { $0.id == id } }
    }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            for await id in self.requests {
                await self.perform(id)
            }
        }
        continuation.finish()
    }

    private func perform(_ id: String) async {
        guard
            let job = update(
                id,
                {
                    $0.phase = .running; $0.startedAt = Date()
                })
        else { return }
        do {
            let outcomes = try await entitlements.refulfilPending(dryRun: job.dryRun) { done, total in
                self.update(id) {
                    $0.done = done; $0.total = total
                }
            }
            update(id) {
                $0.phase = .done; $0.results = outcomes; $0.done = outcomes.count; $0.finishedAt = Date()
            }
            logger.notice("pending proofs re-fulfilled", metadata: ["job": .string(id), "proofs": .stringConvertible(outcomes.count)])
        } catch {
            let reason = Task.isCancelled ? "stopped: the server was stopping" : "\(error)"
            update(id) {
                $0.phase = .failed; $0.error = reason; $0.finishedAt = Date()
            }
            logger.warning("re-fulfilling pending proofs failed", metadata: ["job": .string(id), "error": .string(reason)])
        }
    }

    @discardableResult
    private func update(_ id: String, _ change: (inout Job) -> Void) -> Job? {
        jobs.withLock { jobs in
            guard let index = jobs.firstIndex(where: { $0.id == id }) else { return nil }
            change(&jobs[index])
            return jobs[index]
        }
    }
}

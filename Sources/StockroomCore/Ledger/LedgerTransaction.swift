import Foundation

/// Statements run one after another in one engine transaction: what the ledger's flows of
/// several statements run on (a decision, keeping a pending proof, queueing and settling a call
/// owed to Apple), each written once, below, for both engines.
///
/// Synchronous, because SQLite's transaction is one closure on its writer; PostgreSQL runs a
/// flow on a thread of its own and waits for each statement there (`PostgresLedger`).
public protocol LedgerTransaction {
    /// Runs `statement` in the transaction and reads each row it returns as `Record`; `locking`
    /// holds a SELECT's rows until the transaction ends (`FOR UPDATE` on PostgreSQL; SQLite's
    /// one writer holds every row already).
    func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type, locking: Bool) throws -> [Record]

    /// Takes the lock named `key` until the transaction ends, so that flows under one key run one
    /// at a time across connections and instances (PostgreSQL's advisory lock); `shared`, flows
    /// that take it shared run together, but never while one holds it alone. SQLite's one writer
    /// is every lock already: its transaction takes none.
    func lock(_ key: String, shared: Bool) throws
}

extension LedgerTransaction {
    /// Takes the lock named `key`, alone, until the transaction ends.
    func lock(_ key: String) throws {
        try lock(key, shared: false)
    }

    func fetch<Record: LedgerRecord>(_ statement: LedgerStatement, as type: Record.Type) throws -> [Record] {
        try fetch(statement, as: type, locking: false)
    }

    /// Runs `statement`; returns how many rows it returned (`RETURNING`).
    @discardableResult
    func execute(_ statement: LedgerStatement) throws -> Int {
        try fetch(statement, as: ReturnedRow.self, locking: false).count
    }
}

extension LedgerDecisions where Self: LedgerStatementRunner {
    public func decide<Value: Sendable>(_ scope: PurchaseScope, _ decision: @escaping @Sendable (inout PurchaseWork) throws -> Value)
        async throws -> Value
    {
        try await transaction { transaction in
            var work = PurchaseWork(rows: try Self.read(scope, transaction))
            let value = try decision(&work)
            for statement in work.writes.statements { try transaction.execute(statement) }
            return value
        }
    }

    /// The rows `scope` names, locked: the purchase's lock (decisions on one purchase run one at
    /// a time), then its rows.
    private static func read(_ scope: PurchaseScope, _ transaction: any LedgerTransaction) throws -> [Fulfilment] {
        switch scope {
        case .purchase(let transactionID, let originalTransactionID):
            return try purchase(transactionID: transactionID, originalTransactionID: originalTransactionID, transaction)
        case .purchaseOf(let transactionID):
            guard let row = try transaction.fetch(.fulfilment(transactionID), as: Fulfilment.self).first else { return [] }
            return try purchase(transactionID: row.transactionID, originalTransactionID: row.originalTransactionID, transaction)
        case .transaction(let transactionID):
            return try transaction.fetch(.fulfilment(transactionID), as: Fulfilment.self, locking: true)
        }
    }

    private static func purchase(transactionID: String, originalTransactionID: String, _ transaction: any LedgerTransaction) throws
        -> [Fulfilment]
    {
        try transaction.lock("purchase:" + originalTransactionID)
        let rows = LedgerStatement.purchase(transactionID: transactionID, originalTransactionID: originalTransactionID)
        return try transaction.fetch(rows, as: Fulfilment.self, locking: true)
    }
}

extension PendingProofQueue where Self: LedgerStatementRunner {
    public func keepPendingProof(_ draft: PendingProofDraft, bounds: PendingProofBounds, now: Date) async throws -> PendingProofKeeping {
        let dialect = dialect
        return try await transaction { transaction in
            // The bounds count every kept proof (per transaction, per client, in all): keeps run one at a time.
            try transaction.lock("pending_proofs")
            let cutoff = bounds.purgeCutoff(now: now)
            try transaction.execute(.purgeRejectedPendingProofs(before: cutoff, limit: PendingProofBounds.purgeBatch, dialect))
            if try transaction.execute(.refresh(draft, now: now)) > 0 { return .refreshed }
            let verdict = try bounds.admit(draft, counted: try transaction.fetch(.pendingProofCounts(draft), as: PendingProofCounts.self))
            guard verdict == .kept else { return verdict }
            try transaction.execute(.insert(PendingProof(draft, now: now)))
            return .kept
        }
    }
}

extension ServerCallQueue where Self: LedgerStatementRunner {
    public func queueConsumptionAnswer(
        _ transactionID: String, environment: StoreEnvironment, appTransactionID: String?, requestedBy uuid: String, now: Date
    ) async throws -> ConsumptionQueueing {
        try await transaction { transaction in
            let row = try transaction.fetch(.fulfilment(transactionID), as: Fulfilment.self).first
            // The request's own signed transaction names the download; the proof on record (a
            // receipt, or a JWS signed before Apple added the field) may not.
            let app = appTransactionID ?? row?.appTransactionID
            let rescission = try app.flatMap { app in
                try transaction.fetch(.rescission(of: app, environment: row?.environment ?? environment), as: ConsentRescission.self).first
            }
            let call = ServerCall.consumptionAnswer(
                transactionID, row: row, appTransactionID: app, rescission: rescission, environment: environment, requestedBy: uuid,
                now: now)
            guard try transaction.execute(.queue(call)) == 1 else { return .alreadyAnswered }
            if rescission != nil { return .skippedConsentRescinded }
            return call.status == .queued ? .queued : .skippedNoConsent
        }
    }

    public func completeServerCall(_ id: Int64, _ result: ServerCallResult, now: Date) async throws {
        try await transaction { transaction in
            let call = try transaction.fetch(.serverCall(id), as: ServerCall.self, locking: true).first
            guard let call, call.status == .queued else { return }
            // The row is read locked: its event's sequence number is taken under the lock every writer of it holds.
            let row = try transaction.fetch(.fulfilment(call.transactionID), as: Fulfilment.self, locking: true).first
            for statement in call.settlement(result, row: row, now: now) { try transaction.execute(statement) }
        }
    }
}

extension LedgerStatementRunner {
    /// Every row of every table, read in one consistent snapshot: what `ledger export` writes and
    /// `ledger check` and a backup's check read.
    public func archive() async throws -> LedgerArchive {
        let dialect = dialect
        return try await transaction(.snapshot) { transaction in
            func rows<Row: LedgerRow>(_ type: Row.Type, _ order: String) throws -> [Row] {
                try transaction.fetch(.everyRow(of: type, orderedBy: order), as: type)
            }
            var archive = LedgerArchive()
            archive.fulfilments = try rows(Fulfilment.self, dialect.bytewise("transaction_id"))
            archive.attempts = try rows(DownloadAttempt.self, "id")
            archive.pendingProofs = try rows(PendingProof.self, "id")
            archive.notifications = try rows(NotificationRecord.self, dialect.bytewise("notification_uuid"))
            archive.serverCalls = try rows(ServerCall.self, "id")
            archive.events = try rows(LedgerEvent.self, "id")
            archive.webhookDeliveries = try rows(WebhookDelivery.self, "id")
            archive.consentRescissions = try rows(
                ConsentRescission.self, "\(dialect.bytewise("app_transaction_id")), \(dialect.bytewise("environment"))")
            return archive
        }
    }

    /// Writes every row of `archive` into this ledger, which must be empty; identities continue
    /// after the highest imported ID. Nothing is written when anything fails.
    public func restore(_ archive: LedgerArchive) async throws {
        let dialect = dialect
        try await transaction(.bulk) { transaction in
            for table in LedgerArchive.tables {
                guard try transaction.execute(.anyRow(in: table)) == 0 else {
                    throw LedgerArchive.Malformed(description: "the target ledger is not empty: \(table) has rows")
                }
            }
            for statement in archive.insertions { try transaction.execute(statement) }
            for statement in LedgerStatement.continueIdentities(dialect) { try transaction.execute(statement) }
            // An archive carries no line's mark: each is read from the queue it holds.
            try transaction.execute(.markEveryHeadOfLine)
        }
    }
}

import Foundation
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

extension Delivery {
    /// One step of a download: what the last request brought.
    enum Step {
        /// The partial file holds the whole body: `digest` of its `length` bytes.
        case complete(SHA256Digest, length: Int64)
        /// A new token, or a representation to start from its first byte: ask again at once.
        case again
        /// The transfer broke off; `progressed` when it brought bytes.
        case interrupted(progressed: Bool)
        /// The server's answer settles this delivery for now.
        case settled(DeliveryOutcome)
        /// The object store refused a presigned URL (expired, say): ask Stockroom for a fresh one.
        case storeRefused
    }

    /// Takes `entry` from wherever it stands to an outcome, writing the journal at each change.
    func drive(_ entry: inout JournalEntry) async -> DeliveryOutcome {
        // Only a regular file of the size on record counts: never a link planted there.
        let onDisk = LocalFile.regularFileSize(entry.destination)
        let fileInPlace = onDisk != nil && (entry.expectedSize == nil || onDisk == entry.expectedSize)
        if entry.stage >= .acknowledged {
            if fileInPlace { return reportSafeToFinish(&entry) }
            entry.stage = .downloading  // the file went away: deliver it again
        }
        if entry.stage == .placed, !fileInPlace { entry.stage = .downloading }
        if let notBefore = entry.notBefore, notBefore > configuration.now() {
            // Clamped whatever the journal holds: no date traps, and none is years away.
            let wait = Wait.until(notBefore, now: configuration.now())
            return .retryLater(
                after: wait,
                OutcomeReason(code: entry.lastReasonCode ?? "retry_later", message: entry.lastReasonMessage ?? "Waiting to retry."))
        }
        var interruptions = 0
        var steps = 0
        var freshURLs = 0
        while entry.stage == .downloading {
            steps += 1
            if Task.isCancelled { return settle(&entry, Self.cancelled) }
            if steps > 40 {
                return settle(
                    &entry,
                    .retryLater(
                        after: Backoff.delay(afterFailures: entry.failures + 1),
                        OutcomeReason(code: "no_progress", message: "The download made no progress.")))
            }
            switch await fetch(&entry) {
            case .again:
                continue
            case .interrupted(let progressed):
                interruptions = progressed ? 0 : interruptions + 1
                if interruptions > configuration.maximumInterruptions {
                    return settle(
                        &entry,
                        .retryLater(
                            after: Backoff.delay(afterFailures: entry.failures + 1),
                            OutcomeReason(code: "network", message: "The server could not be reached, or the connection kept dropping.")))
                }
                if !progressed { try? await Task.sleep(for: .milliseconds(100 << interruptions)) }
            case .settled(let outcome):
                return settle(&entry, outcome)
            case .storeRefused:
                freshURLs += 1
                if freshURLs > Self.maximumFreshURLs {
                    let reason = OutcomeReason(
                        code: "store_refused", message: "The object store refused \(freshURLs) presigned URLs in this attempt.")
                    return settle(&entry, .retryLater(after: Backoff.delay(afterFailures: entry.failures + 1), reason))
                }
            case .complete(let digest, let length):
                if let outcome = place(&entry, digest: digest, length: length) { return settle(&entry, outcome) }
            }
        }
        return await acknowledge(&entry)
    }

    static let cancelled = DeliveryOutcome.retryLater(
        after: .seconds(1), OutcomeReason(code: "cancelled", message: "The delivery was cancelled; it resumes next time."))

    /// Checks the whole file against the digest and size on record; moves it into place when it
    /// matches, deletes it when not. Nil to carry on.
    private func place(_ entry: inout JournalEntry, digest: SHA256Digest, length: Int64) -> DeliveryOutcome? {
        let partial = entry.partialPath
        let actual = Data(digest.finalize()).base64EncodedString()
        guard let expected = entry.digest, actual == expected, entry.expectedSize.map({ $0 == length }) ?? true else {
            emit(.digestMismatch(transactionID: entry.transactionID))
            LocalFile.remove(partial)
            entry.forgetRepresentation()
            entry.digestFailures += 1
            do { try save(entry) } catch { return storageFailure(error) }
            if entry.digestFailures >= configuration.maximumDigestFailures {
                entry.digestFailures = 0
                return .retryLater(
                    after: Backoff.delay(afterFailures: entry.failures + 1),
                    OutcomeReason(
                        code: "digest_mismatch", message: "The file arrived damaged \(configuration.maximumDigestFailures) times in a row.")
                )
            }
            return nil
        }
        do {
            let destination = URL(fileURLWithPath: entry.destination)
            try FileManager.default.createDirectory(at: destination.deletingLastPathComponent(), withIntermediateDirectories: true)
            // rename(2) replaces an older copy atomically; the partial sits in the same folder.
            if rename(partial, entry.destination) != 0 { throw CocoaError(.fileWriteUnknown) }
            entry.stage = .placed
            entry.digestFailures = 0
            try save(entry)
            emit(.placed(transactionID: entry.transactionID, file: destination))
        } catch {
            return storageFailure(error)
        }
        return nil
    }

    /// Records how this try ended: a retry date, a refreshed-receipt mark, no file after a revocation.
    func settle(_ entry: inout JournalEntry, _ outcome: DeliveryOutcome) -> DeliveryOutcome {
        switch outcome {
        case .delivered:
            entry.failures = 0
            entry.notBefore = nil
        case .retryLater(let after, let reason):
            if reason.code != "cancelled" {
                entry.failures += 1
                entry.notBefore = configuration.now().addingTimeInterval(Wait.seconds(after))
            }
            entry.lastReasonCode = reason.code
            entry.lastReasonMessage = reason.message
        case .refreshReceipt:
            entry.receiptRefreshed = true
        case .revoked:
            // Only files this delivery made: its partial file, and the file it placed.
            LocalFile.remove(entry.partialPath)
            if entry.stage >= .placed { LocalFile.remove(entry.destination) }
            entry.stage = .downloading
            entry.token = nil
        case .refused:
            LocalFile.remove(entry.partialPath)
        }
        do { try save(entry) } catch { return storageFailure(error) }
        return outcome
    }

    /// The outcome of an error answer, with what the journal knows of this transaction.
    func answer(_ result: TransferResult, _ entry: JournalEntry) -> DeliveryOutcome {
        let status = result.response?.statusCode ?? 0
        let error = ServerAnswer.error(in: result.body)
        var proofIsReceipt = false
        if case .download(let proof) = entry.renewal { proofIsReceipt = proof.isReceipt }
        return ServerAnswer.outcome(
            status: status, code: error?.code, message: error?.message,
            retryAfter: ServerAnswer.retryAfter(result.response?.value(forHTTPHeaderField: "Retry-After"), now: configuration.now()),
            failures: entry.failures, proofIsReceipt: proofIsReceipt, receiptRefreshed: entry.receiptRefreshed)
    }
}

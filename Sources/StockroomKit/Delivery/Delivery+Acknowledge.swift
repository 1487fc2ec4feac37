import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Delivery {
    /// `POST /v1/downloads/{tx}/ack` for a file in place, then the report. The server records a
    /// delivery just after the body went out, so a quick ack can meet 409 `not_delivered`: it is
    /// asked again a few times, and once (at the fifth, past the time a report takes to land) the
    /// bytes the server has no record of sending are fetched again (it records a delivery only
    /// once every byte went out, and a cut transfer may have brought the app bytes the server
    /// could not count).
    func acknowledge(_ entry: inout JournalEntry) async -> DeliveryOutcome {
        var notDelivered = 0
        var transportFailures = 0
        var regrants = 0
        while true {
            if Task.isCancelled { return settle(&entry, Self.cancelled) }
            guard let token = entry.token else {
                regrants += 1
                if regrants > 2 {
                    return settle(
                        &entry,
                        .retryLater(after: .seconds(30), OutcomeReason(code: "token", message: "No download token to acknowledge with.")))
                }
                switch await grantTokenOnly(&entry) {
                case .again: continue
                case .settled(let outcome): return settle(&entry, outcome)
                default: continue
                }
            }
            let path = "/v1/downloads/\(entry.serverTransactionID ?? entry.transactionID)/ack"
            var request = URLRequest(url: endpoint(path))
            request.httpMethod = "POST"
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            let result = await transport.collect(request, limit: 64 << 10)
            emitResponse(entry.transactionID, "POST", path, rangeStart: nil, result)
            guard let status = result.response?.statusCode else {
                transportFailures += 1
                if transportFailures > configuration.maximumInterruptions {
                    return settle(
                        &entry,
                        .retryLater(
                            after: Backoff.delay(afterFailures: entry.failures + 1),
                            OutcomeReason(code: "network", message: "The acknowledgement could not be sent.")))
                }
                try? await Task.sleep(for: .milliseconds(100 << transportFailures))
                continue
            }
            let code = ServerAnswer.error(in: result.body)?.code
            // Any 2xx from the server's own origin (no redirect is followed): the only way to safe-to-finish.
            if (200...299).contains(status) {
                entry.stage = .acknowledged
                entry.failures = 0
                entry.notBefore = nil
                do { try save(entry) } catch { return storageFailure(error) }
                emit(.acknowledged(transactionID: entry.transactionID))
                return reportSafeToFinish(&entry)
            }
            if status == 409, code == "not_delivered" {
                notDelivered += 1
                if notDelivered == 5 { await fetchUnrecorded(entry) }
                if notDelivered > 20 {
                    return settle(
                        &entry,
                        .retryLater(
                            after: Backoff.delay(afterFailures: entry.failures + 1),
                            OutcomeReason(code: "not_delivered", message: "The server has not recorded the delivery yet.", status: 409)))
                }
                try? await Task.sleep(for: .milliseconds(50 * notDelivered))
                continue
            }
            if Self.tokenCodes.contains(code ?? "") {
                entry.token = nil
                continue
            }
            return settle(&entry, answer(result, entry))
        }
    }

    /// A new token without the body: `POST /v1/downloads` stopped after its head, or its `303`
    /// to a store not followed (or a restore).
    private func grantTokenOnly(_ entry: inout JournalEntry) async -> Step {
        switch entry.renewal {
        case .restore(let signedTransaction):
            return await regrantByRestore(&entry, signedTransaction: signedTransaction)
        case .download(let proof):
            var request = URLRequest(url: endpoint("/v1/downloads"))
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = DownloadBody(entry: entry, proof: proof).json
            let result = await transport.send(request) { response in response.statusCode == 200 ? .stop : .memory(limit: 64 << 10) }
            emitResponse(entry.transactionID, "POST", "/v1/downloads", rangeStart: nil, result)
            guard let response = result.response else { return .interrupted(progressed: false) }
            let redirected = ServerOrigin.leadsToContent(status: response.statusCode, answering: .claim)
            guard response.statusCode == 200 || redirected else { return .settled(answer(result, entry)) }
            let rules = bodyRules(entry.productID)
            let granted: BodyRules.Grant
            do {
                granted = redirected ? try rules.redirect(response).grant : try rules.grant(response)
            } catch {
                return .settled(refused(error, entry))
            }
            guard granted.token != nil else { return .settled(refused(.malformedHeader("X-Download-Token"), entry)) }
            granted.adopt(into: &entry)
            do { try save(entry) } catch { return .settled(storageFailure(error)) }
            return .again
        }
    }

    /// Fetches again, reading and dropping them, the ranges of the file the server has no record
    /// of sending (`GET /v1/downloads/{tx}`'s `sentBytes`), so that its record covers the file. A
    /// server that does not say which bytes it sent gets the last byte, as servers before it
    /// counted a transfer that reached the end as a delivery.
    private func fetchUnrecorded(_ entry: JournalEntry) async {
        guard let token = entry.token, let location = entry.location, let target = origin.url(location), let size = entry.expectedSize,
            size > 0
        else {
            return
        }
        let statusPath = "/v1/downloads/\(entry.serverTransactionID ?? entry.transactionID)"
        var ask = URLRequest(url: endpoint(statusPath))
        ask.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        let status = await transport.collect(ask, limit: 64 << 10)
        emitResponse(entry.transactionID, "GET", statusPath, rangeStart: nil, status)
        let recorded = status.response?.statusCode == 200 ? ServerJSON.decode(RecordedBytes.self, from: status.body) : nil
        let missing = recorded.flatMap { $0.missing(size: size) } ?? [(size - 1)...(size - 1)]
        for range in missing {
            var request = URLRequest(url: target)
            request.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
            request.setValue("bytes=\(range.lowerBound)-\(range.upperBound)", forHTTPHeaderField: "Range")
            let length = range.upperBound - range.lowerBound + 1
            let expected = "bytes \(range.lowerBound)-\(range.upperBound)/\(size)"
            // Only the range asked for, and no more of it than its length.
            let result = await transport.send(request) { response in
                response.statusCode == 206 && response.value(forHTTPHeaderField: "Content-Range") == expected
                    ? .discard(limit: length) : .stop
            }
            emitResponse(entry.transactionID, "GET", location, rangeStart: range.lowerBound, result)
            guard result.complete, result.response?.statusCode == 206 else { return }
        }
    }
}

/// What `GET /v1/downloads/{tx}` says the server sent of the file: `sentBytes`, `first-last`
/// ranges in order, each once. Read as a stranger's answer: anything out of order, overlapping,
/// past the file or more than 64 ranges is not used.
struct RecordedBytes: Decodable, Sendable {
    var sentBytes: String?

    /// The ranges of a file of `size` bytes not in `sentBytes`, in order; nil when the server
    /// did not say, or said something that cannot be right.
    func missing(size: Int64) -> [ClosedRange<Int64>]? {
        guard let sentBytes, size > 0 else { return nil }
        var sent: [ClosedRange<Int64>] = []
        if !sentBytes.isEmpty {
            let parts = sentBytes.split(separator: ",", omittingEmptySubsequences: false)
            guard parts.count <= 64 else { return nil }
            for part in parts {
                let bounds = part.split(separator: "-", omittingEmptySubsequences: false)
                guard bounds.count == 2, bounds.allSatisfy({ !$0.isEmpty && $0.utf8.allSatisfy { $0 >= 48 && $0 <= 57 } }),
                    let first = Int64(bounds[0]), let last = Int64(bounds[1]), first <= last, (last < size),
                    first > (sent.last?.upperBound ?? -1)
                else { return nil }
                sent.append(first...last)
            }
        }
        var missing: [ClosedRange<Int64>] = []
        var next: Int64 = 0
        for range in sent {
            if range.lowerBound > next { missing.append(next...(range.lowerBound - 1)) }
            next = range.upperBound + 1
        }
        if next < size { missing.append(next...(size - 1)) }
        return missing
    }
}

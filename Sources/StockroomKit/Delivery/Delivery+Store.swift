import Foundation
#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

extension Delivery {
    /// Fresh presigned URLs one delivery asks Stockroom for after the store refused one (it
    /// expired, say): a store that refuses every one ends in `retryLater`, never in a loop.
    static let maximumFreshURLs = 3

    /// Follows Stockroom's `303` to the claim or `307` to the content to the object store.
    ///
    /// The redirect is checked first (`BodyRules.redirect`, `ServerOrigin.storeURL`). What it says
    /// of the bytes (ETag, digest, size) and its grant go to the journal; its URL, a credential,
    /// never does. The store gets a plain `GET`, with `Range` to continue the bytes on disk: no
    /// token, no proof, no cookie, no `If-Range` (Stockroom's ETag is not the store's). A store
    /// that refuses the URL sends the next step to Stockroom for a fresh one (`storeRefused`); a
    /// redirect from the store is not followed.
    func follow(_ response: HTTPURLResponse, _ entry: inout JournalEntry) async -> Step {
        let redirect: ContentRedirect
        do {
            redirect = try bodyRules(entry.productID).redirect(response)
        } catch {
            return .settled(refused(error, entry))
        }
        let partial = entry.partialPath
        if entry.etag != redirect.etag || entry.digest != redirect.digest || entry.expectedSize != redirect.size {
            // Bytes of another representation go before the journal names the new one.
            LocalFile.remove(partial)
            entry.etag = redirect.etag
            entry.digest = redirect.digest
            entry.expectedSize = redirect.size
        }
        redirect.grant.adopt(into: &entry)
        do { try save(entry) } catch { return .settled(storageFailure(error)) }
        var have = Self.size(partial)
        if have > redirect.size {
            LocalFile.remove(partial)
            have = 0
        } else if have > 0, have == redirect.size {
            // A whole file from before a relaunch: check it.
            guard let hashed = try? SHA256Digest.ofFile(partial, length: have) else { return .interrupted(progressed: false) }
            return .complete(hashed.digest, length: hashed.bytes)
        }
        return await fetchFromStore(redirect, &entry, from: have)
    }

    /// `GET` of the presigned URL, from byte `start`: the body goes to the partial file when the
    /// store's head matches what Stockroom said (`BodyRules.storeFile`).
    private func fetchFromStore(_ redirect: ContentRedirect, _ entry: inout JournalEntry, from start: Int64) async -> Step {
        // The URL is the whole credential: nothing else of the client's goes with it.
        var request = URLRequest(url: redirect.url)
        if start > 0 { request.setValue("bytes=\(start)-", forHTTPHeaderField: "Range") }
        let box = EntryBox(entry)
        let body = bodyRules(entry.productID)
        let size = redirect.size
        let result = await storeTransport.send(request) { response in
            switch response.statusCode {
            case 200:
                return body.storeFile(box, keeping: 0, response: response)
            case 206:
                // Exactly the range asked for: from the bytes on disk to the end Stockroom described.
                guard start > 0, let range = ResponseHeaders.contentRange(response), range.start == start, range.end == size - 1,
                    range.total == size
                else {
                    return .fail(AnswerRefusal.rangeMismatch)
                }
                return body.storeFile(box, keeping: start, response: response)
            default:
                return .memory(limit: 64 << 10)
            }
        }
        entry = box.entry
        emitResponse(entry.transactionID, "GET", redirect.shownURL, rangeStart: start > 0 ? start : nil, result)
        guard let response = result.response else { return .interrupted(progressed: false) }
        let status = response.statusCode
        switch status {
        case 200, 206:
            return await finishedBody(result, box: box, entry: entry)
        case 400, 401, 403:
            return .storeRefused
        case 416:
            // The store has less than Stockroom said: start over from its first byte.
            LocalFile.remove(entry.partialPath)
            entry.forgetRepresentation()
            return save(entry, then: .again)
        case 300...399:
            return .settled(
                .retryLater(
                    after: Backoff.delay(afterFailures: entry.failures + 1),
                    OutcomeReason(
                        code: "redirected", message: "The object store answered with a redirect, which the client never follows.",
                        status: status)))
        default:
            let retryAfter = ServerAnswer.retryAfter(response.value(forHTTPHeaderField: "Retry-After"), now: configuration.now())
            return .settled(
                .retryLater(
                    after: retryAfter ?? Backoff.delay(afterFailures: entry.failures + 1),
                    OutcomeReason(code: "store_unavailable", message: "The object store answered \(status).", status: status)))
        }
    }
}

import Foundation
import Synchronization

/// Certificate chains that verified, kept a while so that the next JWS one of them signs is
/// checked without verifying the chain again: Apple signs every transaction and notification with
/// the same few chains. Apple's own library keeps them 15 minutes, 32 at most; so does this.
///
/// An entry is keyed by the JWS header's exact bytes, which carry the `x5c` certificates (the
/// same chain under another header text is only a miss). A lookup compares a CRC-32C of them,
/// then the bytes: hashing 4 KB of header into a dictionary cost more than the lookup's worth. A hit still checks the payload's
/// `signedDate` against every certificate's validity, as the full verification does, and still
/// verifies the signature with the cached leaf key. An entry is dropped once any of its
/// certificates has expired by the clock, or when it is older than the lifetime. A chain that
/// failed is never kept. Revocation is a separate step after this one (`OCSPRevocationChecker`,
/// for a hit as for a miss); a chain holding a certificate reported revoked is dropped
/// (`forget(certificate:)`). The lifetime bounds how long a verified chain is trusted without
/// being verified again.
public final class VerifiedChainCache: Sendable {
    public static let defaultCapacity = 32
    public static let defaultLifetime: TimeInterval = 15 * 60

    /// A chain that verified: its certificates (leaf, intermediate, the root it ended at), the
    /// leaf's key, and the seconds every certificate is valid in (read once, not per JWS).
    public struct Chain: Sendable, Equatable {
        public let certificates: [Certificate]
        public let key: ECPublicKey
        /// When all the certificates are valid at once (`Certificate.validity`); empty when a
        /// time could not be read, so the chain vouches for nothing.
        public let validity: Range<Int64>
        /// Each certificate's `fingerprint`, read once: what revocation answers are kept under.
        public let fingerprints: [String]

        public init(certificates: [Certificate], key: ECPublicKey) {
            self.certificates = certificates
            self.key = key
            fingerprints = certificates.map(\.fingerprint)
            let windows = certificates.map { $0.validity ?? 0..<0 }
            let start = windows.map(\.lowerBound).max() ?? 0
            let end = windows.map(\.upperBound).min() ?? 0
            validity = start..<max(start, end)
        }

        /// The same certificates, in the same order.
        public static func == (left: Chain, right: Chain) -> Bool { left.fingerprints == right.fingerprints }

        /// Whether every certificate is valid at `date`, as `Certificate.isValid(at:)` judges.
        public func isValid(at date: Date) -> Bool {
            guard let seconds = CertificateTime.seconds(date) else { return false }
            return validity.contains(Int64(seconds))
        }
    }

    private struct Entry {
        var header: [UInt8]
        var check: UInt32
        var chain: Chain
        var verifiedAt: Date
        var lastUsed: UInt64

        func isKept(under header: UnsafeRawBufferPointer, check: UInt32) -> Bool {
            self.check == check && self.header.count == header.count
                && (header.isEmpty || self.header.withUnsafeBytes { memcmp($0.baseAddress!, header.baseAddress!, header.count) == 0 })
        }
    }

    private struct State {
        /// At most `capacity` (32): a scan is cheaper than any index.
        var entries: [Entry] = []
        var clock: UInt64 = 0
        var hits = 0
        var misses = 0
    }

    private let capacity: Int
    private let lifetime: TimeInterval
    private let now: @Sendable () -> Date
    private let state = Mutex(State())

    public init(capacity: Int = defaultCapacity, lifetime: TimeInterval = defaultLifetime, now: @escaping @Sendable () -> Date = { Date() })
    {
        self.capacity = max(1, capacity)
        self.lifetime = lifetime
        self.now = now
    }

    /// The chain kept under `key` while it is fresh and every certificate is valid by the clock;
    /// nil otherwise (a miss: verify it in full). The caller still checks the payload's date
    /// (`servable(_:at:)`) before it counts as a hit.
    func chain(_ header: UnsafeRawBufferPointer) -> Chain? {
        let now = now()
        let check = Self.check(header)
        return state.withLock { state in
            guard let index = state.entries.firstIndex(where: { $0.isKept(under: header, check: check) }) else {
                state.misses += 1
                return nil
            }
            let entry = state.entries[index]
            guard now.timeIntervalSince(entry.verifiedAt) < lifetime, entry.chain.isValid(at: now) else {
                state.entries.remove(at: index)
                state.misses += 1
                return nil
            }
            state.clock += 1
            state.entries[index].lastUsed = state.clock
            return entry.chain
        }
    }

    /// Whether `chain` may vouch for a payload signed at `signedDate`: every certificate was valid
    /// then, as the full verification requires. Counts the hit, or the miss.
    func servable(_ chain: Chain, at signedDate: Date) -> Bool {
        let valid = chain.isValid(at: signedDate)
        state.withLock { state in
            if valid { state.hits += 1 } else { state.misses += 1 }
        }
        return valid
    }

    /// Keeps a chain that has just verified in full; the least recently used goes when full.
    func keep(_ chain: Chain, under header: UnsafeRawBufferPointer) {
        let now = now()
        let check = Self.check(header)
        state.withLock { state in
            state.clock += 1
            let entry = Entry(header: Array(header), check: check, chain: chain, verifiedAt: now, lastUsed: state.clock)
            if let index = state.entries.firstIndex(where: { $0.isKept(under: header, check: check) }) {
                state.entries[index] = entry
                return
            }
            if state.entries.count >= capacity,
                let oldest = state.entries.indices.min(by: { state.entries[$0].lastUsed < state.entries[$1].lastUsed })
            {
                state.entries.remove(at: oldest)
            }
            state.entries.append(entry)
        }
    }

    /// Drops every chain holding the certificate of this `fingerprint` (one reported revoked):
    /// the next JWS it signs is verified in full, and asked about again.
    public func forget(certificate fingerprint: String) {
        state.withLock { state in state.entries.removeAll { $0.chain.fingerprints.contains(fingerprint) } }
    }

    private static func check(_ header: UnsafeRawBufferPointer) -> UInt32 {
        var crc = CRC32C()
        crc.update(header)
        return crc.value
    }

    /// Lookups answered from the cache and not, and chains held: for tests and the bench.
    public var statistics: (hits: Int, misses: Int, chains: Int) {
        state.withLock { ($0.hits, $0.misses, $0.entries.count) }
    }
}

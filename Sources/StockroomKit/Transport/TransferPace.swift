import Foundation

/// The deadlines of one transfer, so that no server holds a request for ever: never `timeout`
/// seconds without a byte; a head complete within `timeout` of its first line; and once the body
/// flows, at least `minimumBytesPerSecond` on average over each window of `timeout` seconds, so a
/// body trickled a byte at a time ends too.
///
/// Pure: the transport feeds it the bytes moved so far and the time, and stops the transfer
/// when it says so.
struct TransferPace: Sendable {
    enum Verdict: Equatable {
        case proceed
        /// Nothing moved for `timeout`, or the head took longer than `timeout`.
        case stalled
        /// The body came slower than the minimum rate over a whole window.
        case tooSlow
    }

    let timeout: TimeInterval
    let minimumBytesPerSecond: Int64
    private var moved: Int64 = -1
    private var lastMove: TimeInterval
    private var headStarted: TimeInterval?
    private var window: (start: TimeInterval, received: Int64)?

    init(timeout: TimeInterval, minimumBytesPerSecond: Int64, now: TimeInterval) {
        self.timeout = max(0.001, timeout)
        self.minimumBytesPerSecond = max(0, minimumBytesPerSecond)
        lastMove = now
    }

    /// The first line of a response's head arrived.
    mutating func headBegan(now: TimeInterval) {
        if headStarted == nil { headStarted = now }
    }

    /// The response's head is complete: the body's windows start now.
    mutating func headEnded(received: Int64, now: TimeInterval) {
        if window == nil { window = (now, received) }
    }

    /// Whether the transfer goes on, with `sent` and `received` bytes moved so far.
    mutating func check(sent: Int64, received: Int64, now: TimeInterval) -> Verdict {
        let total = sent &+ received
        if total != moved {
            moved = total
            lastMove = now
        } else if now - lastMove > timeout {
            return .stalled
        }
        guard let window else {
            if let headStarted, now - headStarted > timeout { return .stalled }
            return .proceed
        }
        let elapsed = now - window.start
        guard elapsed >= timeout else { return .proceed }
        let needed = Int64((Double(minimumBytesPerSecond) * elapsed).rounded(.down))
        if received - window.received < needed { return .tooSlow }
        self.window = (now, received)
        return .proceed
    }
}

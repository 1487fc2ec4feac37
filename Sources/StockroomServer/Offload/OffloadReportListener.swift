import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// Receives nginx's delivery reports (`access_log syslog:server=…`) on a loopback UDP port and
/// hands each to the recorder, one at a time.
///
/// Datagrams from another address, longer than `DeliveryLogLine.maximumLength`, or not a
/// delivery line are dropped (counted in the log at `debug`): the port is reachable by anything
/// on this machine. A burst beyond what the ledger keeps up with waits in the socket buffer and
/// is dropped by the kernel past it, never queued without bound here.
struct OffloadReportListener: Service {
    let address: OffloadReportAddress
    let recorder: OffloadDeliveryRecorder
    let logger: Logger

    func run() async throws {
        let channel: NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, Never>
        do {
            channel = try await bind()
        } catch {
            throw OffloadReportListenerError(address: address, reason: "\(error)")
        }
        let port = channel.channel.localAddress?.port ?? address.port
        logger.info("receiving nginx delivery reports", metadata: ["address": .string("\(address.host):\(port)")])
        try await withGracefulShutdownHandler {
            try await channel.executeThenClose { inbound in
                for try await envelope in inbound {
                    await receive(envelope)
                }
            }
        } onGracefulShutdown: {
            channel.channel.close(promise: nil)
        }
    }

    /// No SO_REUSEADDR: on UDP it would let a second server share the port and take the reports.
    private func bind() async throws -> NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, Never> {
        try await DatagramBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(
                ChannelOptions.recvAllocator, value: FixedSizeRecvByteBufferAllocator(capacity: DeliveryLogLine.maximumLength + 1)
            )
            .bind(host: address.host, port: address.port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, Never>(wrappingChannelSynchronously: channel)
                }
            }
    }

    private func receive(_ envelope: AddressedEnvelope<ByteBuffer>) async {
        guard let sender = envelope.remoteAddress.ipAddress, LoopbackHost.contains(sender) else {
            logger.debug("delivery report from a non-loopback address dropped")
            return
        }
        guard let line = DeliveryLogLine.parse(envelope.data.readableBytesView) else {
            logger.debug(
                "datagram that is not a delivery report dropped", metadata: ["bytes": .stringConvertible(envelope.data.readableBytes)])
            return
        }
        await recorder.record(line)
    }
}

extension OffloadReportListener: CustomStringConvertible {
    var description: String { "OffloadReportListener" }
}

/// The report port could not be bound (taken, or not a local address); the server stops.
struct OffloadReportListenerError: Error, CustomStringConvertible {
    let address: OffloadReportAddress
    let reason: String

    var description: String { "cannot receive nginx's delivery reports on \(address) (--offload-report): \(reason)" }
}

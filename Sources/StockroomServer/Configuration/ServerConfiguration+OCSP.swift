public import Logging
public import StockroomCore

extension ServerConfiguration {
    /// The OCSP policy in force: `ocsp`, or off with the simulator (offline; its chains name no
    /// responder).
    public var revocationPolicy: RevocationPolicy {
        upstream == .simulator ? .off : ocsp
    }

    /// What asks OCSP about each JWS's signing chain; nil when the policy is off.
    public func revocationChecker(logger: Logger) -> OCSPRevocationChecker? {
        revocationPolicy == .off ? nil : OCSPRevocationChecker(policy: revocationPolicy, logger: logger)
    }
}

/// What the OCSP answers about a JWS's signing chain decide (`--ocsp hard|soft|off`).
///
/// Apple's libraries ask OCSP about the leaf and the intermediate when their online checks are
/// on, and refuse a revoked certificate; so does Stockroom, and the policy says what happens when
/// no answer says good or revoked.
public enum RevocationPolicy: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
    /// Only good answers pass: a revoked certificate, an unknown one, and a responder that gives
    /// no usable answer all refuse the JWS (the last as a transient failure, tried again later).
    case hard
    /// A revoked certificate refuses the JWS; an unknown one and a responder that gives no usable
    /// answer are allowed, counted and logged (the default: verification stays up while Apple's
    /// responder is out of reach).
    case soft
    /// No OCSP request is made: offline (the App Store simulator, whose chains name no responder).
    case off

    public var description: String { rawValue }
}

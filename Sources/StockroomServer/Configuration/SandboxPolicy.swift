/// Whether purchases made in the App Store sandbox are served (`--sandbox allow|deny`).
///
/// App Review buys in the sandbox against the production server, so the default allows them;
/// an operator may deny them once the app is through review.
public enum SandboxPolicy: String, Sendable, Equatable, CaseIterable {
    /// Sandbox purchases are served like production ones (the default).
    case allow
    /// Sandbox purchases are refused.
    case deny
}

/// The App Store's two environments; a transaction is recorded with the one that verified it.
public enum StoreEnvironment: String, Sendable, Codable, CaseIterable {
    case production = "Production"
    case sandbox = "Sandbox"
}

import AppStoreSimulator
import Foundation
import HummingbirdTesting
import PropertyBased
import StockroomCore
import StockroomPostgresTestSupport
import StockroomTestSupport
import Testing
@testable import StockroomEntitlement

/// Random sequences of claims, outages, notifications, revocations and re-fulfilments against
/// the entitlement component on a real ledger (SQLite, then PostgreSQL) and the live simulator. After each step:
/// no entitlement's product differs from its verified proof, nothing revoked comes back
/// without reinstate or REFUND_REVERSED, and no unverified proof ever authorised bytes.
@Suite struct EntitlementPropertyTests {
    @Test(arguments: LedgerEngine.allCases) func noSequenceOfStepsBreaksTheRules(_ engine: LedgerEngine) async throws {
        var simulator = SimulatorConfiguration()
        simulator.port = 0
        try await buildSimulatorApplication(configuration: simulator).test(.live) { client in
            let control = SimulatorControl(client)
            let rootPEM = String(buffer: try await client.execute(uri: "/sim/root.pem", method: .get).body)
            let root = try Certificate(pem: rootPEM)
            // PostgreSQL's sequences each get a database of their own; fewer of them keep this test,
            // the longest of a run, from loading the two cores the whole suite shares.
            await propertyCheck(count: engine == .sqlite ? 40 : 25, input: Gen.int(in: 0...99_999).array(of: 4...24)) { steps in
                try await TestLedger.with(engine) { test in
                    let world = try await EntitlementWorld(control: control, root: root, ledger: test.ledger)
                    for code in steps {
                        try await world.step(code)
                    }
                }
            }
        }
    }
}

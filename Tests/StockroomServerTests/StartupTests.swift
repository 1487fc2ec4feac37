import Foundation
import Testing
@testable import StockroomServer

/// The server refuses to start, with a reason, rather than serving something wrong.
@Suite struct StartupTests {
    @Test func aBadCatalogueRefusesStartNamingTheProblem() async throws {
        var fixture = try ServerFixture()
        try fixture.root.write("catalog/products.json", ServerFixture.catalog([ServerFixture.entry("com.example.book", file: "../escape")]))
        fixture.configuration.port = 0
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)"
                == #"catalogue refused (1 problem): product 1 (com.example.book): file "../escape" uses ".." to leave the content folder"#
        }
    }

    @Test func aMissingContentFolderRefusesStart() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.contentFolder = fixture.root.path + "/nowhere"
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)".hasPrefix("content: content folder")
        }
    }

    @Test func anUnwritableDatabasePathRefusesStart() async throws {
        var fixture = try ServerFixture()
        try fixture.root.write("not-a-folder", "a file")
        fixture.configuration.databaseLocation = fixture.root.path + "/not-a-folder/stockroom.sqlite"
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)".hasPrefix("database \"\(fixture.configuration.databaseLocation)\" cannot be opened for writing")
        }
    }

    @Test func theBuiltInSimulatorNeedsAFixedPort() async throws {
        var fixture = try ServerFixture()
        fixture.configuration.upstream = .simulator
        await #expect {
            _ = try await fixture.application()
        } throws: { error in
            "\(error)".contains("needs a fixed --port")
        }
    }
}

import StockroomPostgres
import Testing

/// `--database postgres://…`: what is accepted, what is refused, and that the password never
/// shows in what is printed.
@Suite struct PostgresAddressTests {
    @Test func aFullAddressIsReadWithItsPasswordKeptOutOfItsDescription() throws {
        let address = try PostgresAddress(url: "postgres://stock%40room:s3cr%2Ft@db.example:6543/ledger?sslmode=require")
        #expect(address.host == "db.example" && address.port == 6543 && address.database == "ledger")
        #expect(address.username == "stock@room" && address.password == "s3cr/t" && address.tls == .require)
        #expect(address.description == "postgres://stock@room@db.example:6543/ledger?sslmode=require")
        #expect(!address.description.contains("s3cr"))
        #expect(try PostgresAddress(url: address.url) == address, "url round-trips, password included")
    }

    @Test func thePortDefaultsTo5432AndTLSToPrefer() throws {
        let address = try PostgresAddress(url: "postgresql://stockroom@127.0.0.1/stockroom")
        #expect(address.port == 5432 && address.tls == .prefer && address.password == nil)
    }

    @Test func anIPv6HostIsUnbracketedForTheSocketAndBracketedWhenPrinted() throws {
        let address = try PostgresAddress(url: "postgres://u@[::1]:5433/d")
        #expect(address.host == "::1")
        #expect(address.description == "postgres://u@[::1]:5433/d")
    }

    @Test(arguments: [
        "postgres://host/db", "postgres://user@/db", "postgres://user@host", "postgres://user@host/", "postgres://user@host/a/b",
        "postgres://user@host:0/db", "postgres://user@host/db?sslmode=sometimes", "postgres://user@host/db?user=x", "mysql://user@host/db",
        "postgres://user:pw@host:99999/db",
    ])
    func aMalformedAddressIsRefusedWithoutRepeatingItsPassword(_ text: String) {
        #expect(throws: PostgresAddress.Malformed.self) { try PostgresAddress(url: text) }
        do {
            _ = try PostgresAddress(url: text)
        } catch {
            #expect(!error.description.contains("pw"))
        }
    }

    @Test func onlyPostgresSchemesNameAPostgresLedger() {
        #expect(PostgresAddress.isAddress("postgres://u@h/d") && PostgresAddress.isAddress("postgresql://u@h/d"))
        #expect(!PostgresAddress.isAddress("stockroom.sqlite") && !PostgresAddress.isAddress("/var/lib/postgres://x"))
    }
}

import Foundation
import StockroomCore
import GRDB

extension SQLiteDatabase {
    /// Whether an existing ledger file can take a write (a write transaction begun and rolled
    /// back, so nothing changes, not even a migration) and how many fulfilments it holds.
    public static func checkWritable(path: String) throws -> Int {
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let queue = try DatabaseQueue(path: path, configuration: configuration)
        try queue.inDatabase { db in
            try db.execute(sql: "BEGIN IMMEDIATE")
            try db.execute(sql: "ROLLBACK")
        }
        return try queue.read { db in
            try db.tableExists("fulfilments") ? Int.fetchOne(db, sql: "SELECT COUNT(*) FROM fulfilments") ?? 0 : 0
        }
    }
}

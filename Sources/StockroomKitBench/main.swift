import Foundation
import StockroomKit

// `make bench` only (.ci/bench-client): one delivery through StockroomKit in a process that links
// nothing else, as an app does, so its peak RSS is the library's and not the `stockroom` tool's
// (which carries the whole server). Arguments: server URL, product ID, a file holding the app
// receipt (base64), the transaction ID, the destination folder, the journal folder.
let arguments = CommandLine.arguments
guard arguments.count == 7, let server = URL(string: arguments[1]) else {
    FileHandle.standardError.write(Data("usage: StockroomKitBench SERVER PRODUCT RECEIPT-FILE TRANSACTION-ID INTO JOURNAL\n".utf8))
    exit(64)
}
let text = try String(contentsOfFile: arguments[3], encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
guard let receipt = Data(base64Encoded: text, options: .ignoreUnknownCharacters) else {
    FileHandle.standardError.write(Data("the receipt file is not base64\n".utf8))
    exit(65)
}
let delivery = try Delivery(
    configuration: Delivery.Configuration(
        server: server, journalFolder: URL(fileURLWithPath: arguments[6]), folder: URL(fileURLWithPath: arguments[5])))
let outcome = await delivery.deliver(Purchase(productID: arguments[2], transactionID: arguments[4], proof: .appReceipt(receipt)))
print(outcome.code)
exit(outcome.code == "delivered" ? 0 : 1)

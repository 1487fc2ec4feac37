import Foundation

#if STOCKROOM_LIBFUZZER
    // Built by `.ci/fuzz` with `swift build --sanitize=fuzzer -Xswiftc -DSTOCKROOM_LIBFUZZER`: libFuzzer
    // owns `main` and calls these two.

    /// Picks the harness from `STOCKROOM_FUZZ_TARGET` before the first input; with
    /// `STOCKROOM_FUZZ_WRITE_SEEDS=DIR` writes the generated seeds instead and exits.
    @_cdecl("LLVMFuzzerInitialize")
    public func fuzzerInitialize(
        _ argc: UnsafeMutablePointer<CInt>, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>
    ) -> CInt {
        if let folder = ProcessInfo.processInfo.environment["STOCKROOM_FUZZ_WRITE_SEEDS"] {
            SeedWriter.writeAll(to: folder)
            exit(0)
        }
        guard FuzzTarget.current != nil else {
            let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: ", ")
            FileHandle.standardError.write(Data("set STOCKROOM_FUZZ_TARGET to one of: \(names)\n".utf8))
            exit(2)
        }
        return 0
    }

    /// One input to the chosen harness.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        guard let target = FuzzTarget.current else { return 0 }
        let input = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
        target.run(input)
        return 0
    }
#else
    /// The plain build: replays files through a harness (a crash libFuzzer saved, or a corpus),
    /// and writes the generated seeds. `StockroomFuzz TARGET FILE|DIR...`, `StockroomFuzz --write-seeds DIR`.
    @main
    struct ReplayDriver {
        static func main() {
            let arguments = Array(CommandLine.arguments.dropFirst())
            if arguments.first == "--write-seeds", arguments.count == 2 {
                SeedWriter.writeAll(to: arguments[1])
                return
            }
            guard let name = arguments.first, let target = FuzzTarget(rawValue: name), arguments.count >= 2 else {
                let names = FuzzTarget.allCases.map(\.rawValue).joined(separator: "|")
                print("usage: StockroomFuzz \(names) FILE|DIR...\n       StockroomFuzz --write-seeds DIR")
                exit(2)
            }
            var count = 0
            for path in arguments.dropFirst() {
                for file in files(at: path) {
                    guard let data = FileManager.default.contents(atPath: file) else { continue }
                    target.run(Array(data))
                    count += 1
                }
            }
            print("\(name): \(count) input(s) ran without a crash")
        }

        private static func files(at path: String) -> [String] {
            var isFolder: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue else { return [path] }
            let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
            return names.sorted().map { path + "/" + $0 }
        }
    }
#endif

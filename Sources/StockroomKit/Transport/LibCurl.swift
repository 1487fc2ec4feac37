#if os(Linux) && (arch(x86_64) || arch(arm64))
    import Foundation
    import Glibc

    /// One libcurl easy handle, with the header list it was given; both freed in `deinit`. Its
    /// connection cache outlives `reset()`, so a reused handle keeps its connection alive. One thread
    /// uses it at a time (`CurlHandles` hands it over).
    final class FoundationCurlHandle: @unchecked Sendable {
        private let api: LibCurl
        private let handle: OpaquePointer
        private var headers: OpaquePointer?

        /// nil where libcurl cannot be loaded.
        init?() {
            guard let api = LibCurl.shared, let handle = api.easyInit() else { return nil }
            self.api = api
            self.handle = handle
        }

        deinit {
            api.easyCleanup(handle)
            api.slistFreeAll(headers)
        }

        /// Forgets every option (and the header list), keeping the connections.
        func reset() {
            api.easyReset(handle)
            api.slistFreeAll(headers)
            headers = nil
        }

        @discardableResult
        func set(_ option: LibCurl.Option, _ value: Int) -> Bool { api.setLong(handle, option.rawValue, value) == 0 }

        /// libcurl copies strings it is given.
        @discardableResult
        func set(_ option: LibCurl.Option, _ value: String) -> Bool {
            value.withCString { api.setPointer(handle, option.rawValue, UnsafeRawPointer($0)) == 0 }
        }

        /// A callback or its context: the caller keeps it alive until `perform()` returned.
        @discardableResult
        func set(_ option: LibCurl.Option, pointer: UnsafeRawPointer?) -> Bool { api.setPointer(handle, option.rawValue, pointer) == 0 }

        /// Request header lines, `Name: value`.
        func setHeaders(_ lines: [String]) {
            var list: OpaquePointer?
            for line in lines {
                list = line.withCString { api.slistAppend(list, $0) } ?? list
            }
            api.slistFreeAll(headers)
            headers = list
            _ = api.setPointer(handle, LibCurl.Option.httpHeader.rawValue, list.map { UnsafeRawPointer($0) })
        }

        /// Runs the transfer on this thread until it ends; a `CURLE_*` code.
        func perform() -> Int32 { api.easyPerform(handle) }
    }

    /// The libcurl that FoundationNetworking itself links (URLSession on Linux is libcurl), reached
    /// with `dlsym` so that this target still imports Foundation alone.
    ///
    /// `curl_easy_setopt` and `curl_easy_getinfo` are variadic; they are called here through
    /// non-variadic types of the same arguments. On Linux's x86-64 and AArch64 calling conventions a
    /// variadic integer or pointer argument travels exactly as a named one does, which is why this
    /// file is compiled for those two only.
    struct LibCurl: @unchecked Sendable {
        typealias WriteCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
        typealias ProgressCallback = @convention(c) (UnsafeMutableRawPointer?, Int64, Int64, Int64, Int64) -> Int32

        let easyInit: @convention(c) () -> OpaquePointer?
        let easyCleanup: @convention(c) (OpaquePointer?) -> Void
        let easyReset: @convention(c) (OpaquePointer?) -> Void
        let easyPerform: @convention(c) (OpaquePointer?) -> Int32
        let setLong: @convention(c) (OpaquePointer?, Int32, Int) -> Int32
        let setPointer: @convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?) -> Int32
        let slistAppend: @convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?
        let slistFreeAll: @convention(c) (OpaquePointer?) -> Void

        /// libcurl, once; nil where it cannot be loaded (URLSession then carries every transfer).
        static let shared: LibCurl? = {
            guard let library = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL) else { return nil }
            func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
                dlsym(library, name).map { unsafeBitCast($0, to: type) }
            }
            guard let globalInit = symbol("curl_global_init", as: (@convention(c) (Int) -> Int32).self),
                let easyInit = symbol("curl_easy_init", as: (@convention(c) () -> OpaquePointer?).self),
                let easyCleanup = symbol("curl_easy_cleanup", as: (@convention(c) (OpaquePointer?) -> Void).self),
                let easyReset = symbol("curl_easy_reset", as: (@convention(c) (OpaquePointer?) -> Void).self),
                let easyPerform = symbol("curl_easy_perform", as: (@convention(c) (OpaquePointer?) -> Int32).self),
                let setLong = symbol("curl_easy_setopt", as: (@convention(c) (OpaquePointer?, Int32, Int) -> Int32).self),
                let setPointer = symbol("curl_easy_setopt", as: (@convention(c) (OpaquePointer?, Int32, UnsafeRawPointer?) -> Int32).self),
                let slistAppend = symbol(
                    "curl_slist_append", as: (@convention(c) (OpaquePointer?, UnsafePointer<CChar>?) -> OpaquePointer?).self),
                let slistFreeAll = symbol("curl_slist_free_all", as: (@convention(c) (OpaquePointer?) -> Void).self),
                globalInit(3) == 0  // CURL_GLOBAL_ALL; counted, so FoundationNetworking's own call is harmless
            else { return nil }
            return LibCurl(
                easyInit: easyInit, easyCleanup: easyCleanup, easyReset: easyReset, easyPerform: easyPerform,
                setLong: setLong, setPointer: setPointer, slistAppend: slistAppend, slistFreeAll: slistFreeAll)
        }()

        /// The options used, with their numbers from `curl.h`.
        enum Option: Int32 {
            case writeData = 10001
            case url = 10002
            case writeFunction = 20011
            case userAgent = 10018
            case httpHeader = 10023
            case headerData = 10029
            case customRequest = 10036
            case noProgress = 43
            case post = 47
            case followLocation = 52
            case progressData = 10057
            case caInfo = 10065
            case caPath = 10097
            case headerFunction = 20079
            case httpGet = 80
            case bufferSize = 98
            case noSignal = 99
            case postFieldSize = 30120
            case connectTimeoutMilliseconds = 156
            case copyPostFields = 10165
            case protocols = 181
            case progressFunction = 20219
            case pinnedPublicKey = 10230
        }

        /// `CURLE_*` results that say more than "the transfer failed".
        enum Result: Int32 {
            case ok = 0
            case couldNotResolveHost = 6
            case couldNotConnect = 7
            case partialFile = 18
            case writeError = 23
            case timedOut = 28
            case abortedByCallback = 42
            case gotNothing = 52
            case sendError = 55
            case receiveError = 56
            case peerCertificate = 60
            case sslConnect = 35
            case certificateAuthorityFile = 77
            case pinnedPublicKeyMismatch = 90
        }
    }
#endif

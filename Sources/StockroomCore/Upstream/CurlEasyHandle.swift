import CCurl

/// One libcurl easy handle: owns the `CURL *` and frees it in `deinit`.
///
/// A handle keeps its connection cache across `reset()`, which is how upstream connections stay
/// alive between calls. It is used by one thread at a time (the pool hands it out exclusively).
final class CurlEasyHandle: @unchecked Sendable {
    let raw: UnsafeMutableRawPointer

    init?() {
        CurlEasyHandle.globalInit
        guard let raw = curl_easy_init() else { return nil }
        self.raw = raw
    }

    deinit { curl_easy_cleanup(raw) }

    /// Clears every option; live connections, DNS and TLS session caches survive.
    func reset() { curl_easy_reset(raw) }

    func set(_ option: CURLoption, _ value: Int) -> CURLcode {
        stockroom_curl_setopt_long(raw, option, value)
    }

    func set(_ option: CURLoption, _ value: String) -> CURLcode {
        value.withCString { stockroom_curl_setopt_string(raw, option, $0) }  // curl copies strings
    }

    func set(_ option: CURLoption, pointer: UnsafeMutableRawPointer?) -> CURLcode {
        stockroom_curl_setopt_pointer(raw, option, pointer)
    }

    func set(_ option: CURLoption, list: UnsafeMutablePointer<curl_slist>?) -> CURLcode {
        stockroom_curl_setopt_slist(raw, option, list)
    }

    func perform() -> CURLcode { curl_easy_perform(raw) }

    func info(_ info: CURLINFO) -> Int {
        var value = 0
        _ = stockroom_curl_getinfo_long(raw, info, &value)
        return value
    }

    /// `curl_global_init` must run once, before any thread uses libcurl.
    private static let globalInit: Void = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
    }()
}

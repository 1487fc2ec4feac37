import Foundation

#if canImport(CryptoKit)
    import CryptoKit

    /// SHA-256 over a stream of chunks: CryptoKit on Apple platforms.
    struct SHA256Digest: Sendable {
        private var hasher = SHA256()

        mutating func update(_ bytes: UnsafeRawBufferPointer) { hasher.update(bufferPointer: bytes) }

        consuming func finalize() -> [UInt8] { Array(hasher.finalize()) }
    }
#else
    #if canImport(Glibc)
        import Glibc
    #endif

    /// SHA-256 over a stream of chunks: Linux has no CryptoKit, and the library links nothing but
    /// Foundation. The system's libcrypto (OpenSSL 3), loaded with `dlopen` when present, hashes
    /// with the CPU's SHA instructions, several times faster than Swift can (a download is hashed
    /// as fast as loopback delivers it); without it, `SwiftSHA256`.
    struct SHA256Digest: Sendable {
        private enum Backend {
            case libcrypto(LibcryptoSHA256)
            case swift(SwiftSHA256)
        }

        private var backend: Backend

        init() { self.init(libcrypto: true) }

        /// `libcrypto: false` hashes in Swift even where libcrypto is there (the tests compare both).
        init(libcrypto: Bool) {
            if libcrypto, let context = LibcryptoSHA256() {
                backend = .libcrypto(context)
            } else {
                backend = .swift(SwiftSHA256())
            }
        }

        /// Whether libcrypto does the hashing.
        var usesLibcrypto: Bool {
            if case .libcrypto = backend { true } else { false }
        }

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            switch backend {
            case .libcrypto(var context):
                // Copy on write, so a copied digest hashes on its own. The placeholder drops the
                // backend's reference: `context` is then unique unless the digest was copied.
                backend = .swift(SwiftSHA256())
                if !isKnownUniquelyReferenced(&context), let copy = context.copy() { context = copy }
                context.update(bytes)
                backend = .libcrypto(context)
            case .swift(var hasher):
                hasher.update(bytes)
                backend = .swift(hasher)
            }
        }

        consuming func finalize() -> [UInt8] {
            switch backend {
            case .libcrypto(var context):
                // Finalizing ends the context: a copy that shares it keeps its own.
                backend = .swift(SwiftSHA256())
                if !isKnownUniquelyReferenced(&context), let copy = context.copy() { context = copy }
                return context.finalize()
            case .swift(let hasher):
                return hasher.finalize()
            }
        }
    }

    /// One libcrypto `EVP_MD_CTX` for SHA-256. Only its `SHA256Digest` (which copies it before a
    /// shared write) touches it, so it is never used from two threads at once.
    private final class LibcryptoSHA256: @unchecked Sendable {
        private let context: OpaquePointer
        private var finalized: [UInt8]?

        init?() {
            guard let api = Self.api, let context = api.new() else { return nil }
            guard api.initialize(context, api.sha256(), nil) == 1 else {
                api.free(context)
                return nil
            }
            self.context = context
        }

        private init(copying other: LibcryptoSHA256, api: API) throws {
            guard let context = api.new() else { throw CocoaError(.featureUnsupported) }
            guard api.copy(context, other.context) == 1 else {
                api.free(context)
                throw CocoaError(.featureUnsupported)
            }
            self.context = context
        }

        deinit { Self.api?.free(context) }

        func copy() -> LibcryptoSHA256? {
            guard let api = Self.api else { return nil }
            return try? LibcryptoSHA256(copying: self, api: api)
        }

        func update(_ bytes: UnsafeRawBufferPointer) {
            guard let api = Self.api, let base = bytes.baseAddress, bytes.count > 0 else { return }
            _ = api.update(context, base, bytes.count)
        }

        func finalize() -> [UInt8] {
            if let finalized { return finalized }
            var out = [UInt8](repeating: 0, count: 32)
            var size: UInt32 = 0
            _ = out.withUnsafeMutableBufferPointer { Self.api?.final(context, $0.baseAddress, &size) }
            finalized = out
            return out
        }

        /// The six EVP functions, from libcrypto if the system has it.
        private struct API {
            let new: @convention(c) () -> OpaquePointer?
            let free: @convention(c) (OpaquePointer?) -> Void
            let sha256: @convention(c) () -> OpaquePointer?
            let initialize: @convention(c) (OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32
            let update: @convention(c) (OpaquePointer?, UnsafeRawPointer?, Int) -> Int32
            let final: @convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt32>?) -> Int32
            let copy: @convention(c) (OpaquePointer?, OpaquePointer?) -> Int32
        }

        private static let api: API? = {
            guard let library = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL) else { return nil }
            func symbol<Function>(_ name: String, as type: Function.Type) -> Function? {
                dlsym(library, name).map { unsafeBitCast($0, to: type) }
            }
            guard let new = symbol("EVP_MD_CTX_new", as: (@convention(c) () -> OpaquePointer?).self),
                let free = symbol("EVP_MD_CTX_free", as: (@convention(c) (OpaquePointer?) -> Void).self),
                let sha256 = symbol("EVP_sha256", as: (@convention(c) () -> OpaquePointer?).self),
                let initialize = symbol(
                    "EVP_DigestInit_ex", as: (@convention(c) (OpaquePointer?, OpaquePointer?, OpaquePointer?) -> Int32).self),
                let update = symbol("EVP_DigestUpdate", as: (@convention(c) (OpaquePointer?, UnsafeRawPointer?, Int) -> Int32).self),
                let final = symbol(
                    "EVP_DigestFinal_ex",
                    as: (@convention(c) (OpaquePointer?, UnsafeMutablePointer<UInt8>?, UnsafeMutablePointer<UInt32>?) -> Int32).self),
                let copy = symbol("EVP_MD_CTX_copy_ex", as: (@convention(c) (OpaquePointer?, OpaquePointer?) -> Int32).self)
            else { return nil }
            return API(new: new, free: free, sha256: sha256, initialize: initialize, update: update, final: final, copy: copy)
        }()
    }

    /// SHA-256 (FIPS 180-4) in Swift: where no libcrypto can be loaded.
    struct SwiftSHA256: Sendable {
        private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
            0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
        )
        private var pending: [UInt8] = []
        private var length: UInt64 = 0

        mutating func update(_ bytes: UnsafeRawBufferPointer) {
            guard bytes.count > 0 else { return }
            length &+= UInt64(bytes.count)
            var offset = 0
            if !pending.isEmpty {
                let take = min(64 - pending.count, bytes.count)
                pending.append(contentsOf: bytes[0..<take])
                offset = take
                guard pending.count == 64 else { return }
                pending.withUnsafeBytes { compress(blocks: $0) }
                pending.removeAll(keepingCapacity: true)
            }
            let whole = (bytes.count - offset) / 64 * 64
            if whole > 0 { compress(blocks: UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + whole)])) }
            offset += whole
            if offset < bytes.count { pending.append(contentsOf: bytes[offset...]) }
        }

        consuming func finalize() -> [UInt8] {
            let bitLength = length &* 8
            var tail = pending
            tail.append(0x80)
            while tail.count % 64 != 56 { tail.append(0) }
            for shift in stride(from: 56, through: 0, by: -8) { tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift))) }
            tail.withUnsafeBytes { compress(blocks: $0) }
            var out: [UInt8] = []
            out.reserveCapacity(32)
            for word in [state.0, state.1, state.2, state.3, state.4, state.5, state.6, state.7] {
                out.append(contentsOf: [
                    UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8),
                    UInt8(truncatingIfNeeded: word),
                ])
            }
            return out
        }

        private static let k: [UInt32] = [
            0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
            0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
            0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
            0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
            0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
            0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
            0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
            0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
        ]

        private mutating func compress(blocks: UnsafeRawBufferPointer) {
            var (h0, h1, h2, h3, h4, h5, h6, h7) = state
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                Self.k.withUnsafeBufferPointer { k in
                    var block = 0
                    while block < blocks.count {
                        for t in 0..<16 {
                            w[t] = UInt32(bigEndian: blocks.loadUnaligned(fromByteOffset: block + t * 4, as: UInt32.self))
                        }
                        for t in 16..<64 {
                            let a = w[t - 15], b = w[t - 2]
                            let s0 = a.rotatedRight(7) ^ a.rotatedRight(18) ^ (a >> 3)
                            let s1 = b.rotatedRight(17) ^ b.rotatedRight(19) ^ (b >> 10)
                            w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                        }
                        var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                        for t in 0..<64 {
                            let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
                            let choice = (e & f) ^ (~e & g)
                            let t1 = h &+ s1 &+ choice &+ k[t] &+ w[t]
                            let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
                            let majority = (a & b) ^ (a & c) ^ (b & c)
                            let t2 = s0 &+ majority
                            h = g; g = f; f = e; e = d &+ t1
                            d = c; c = b; b = a; a = t1 &+ t2
                        }
                        h0 &+= a; h1 &+= b; h2 &+= c; h3 &+= d; h4 &+= e; h5 &+= f; h6 &+= g; h7 &+= h
                        block += 64
                    }
                }
            }
            state = (h0, h1, h2, h3, h4, h5, h6, h7)
        }
    }

    extension UInt32 {
        @inline(__always) fileprivate func rotatedRight(_ count: UInt32) -> UInt32 { (self >> count) | (self << (32 - count)) }
    }
#endif

extension SHA256Digest {
    mutating func update(_ data: Data) { data.withUnsafeBytes { update($0) } }

    /// The digest of a file's first `length` bytes, read in 1 MiB pieces (a partial file before a resume).
    static func ofFile(_ path: String, length: Int64? = nil) throws -> (digest: SHA256Digest, bytes: Int64) {
        let handle = FileHandle(fileDescriptor: try LocalFile.openFile(path, O_RDONLY | O_NONBLOCK), closeOnDealloc: true)
        defer { try? handle.close() }
        var digest = SHA256Digest()
        var total: Int64 = 0
        while length.map({ total < $0 }) ?? true {
            let want = length.map { Int(min(1 << 20, $0 - total)) } ?? (1 << 20)
            guard let chunk = try handle.read(upToCount: want), !chunk.isEmpty else { break }
            digest.update(chunk)
            total += Int64(chunk.count)
        }
        return (digest, total)
    }
}

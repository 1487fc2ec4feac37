/// A small BER reader (definite and indefinite lengths, constructed strings) over bytes a
/// stranger sent: every length is checked against the bytes left and nesting is bounded, so
/// garbage can only fail, never read out of bounds or recurse without end.
struct BERReader {
    /// One tag-length-value: `contents` excludes the end-of-contents octets of an indefinite length.
    struct Element {
        var tag: UInt8
        var contents: Range<Int>
        /// Where the next element starts.
        var end: Int

        var isConstructed: Bool { tag & 0x20 != 0 }
    }

    /// Deeper than any receipt nests.
    static let maximumDepth = 24

    let bytes: [UInt8]

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
    }

    /// The element starting at `start` and ending by `limit`; nil when malformed.
    func element(at start: Int, limit: Int, depth: Int = 0) -> Element? {
        guard depth < Self.maximumDepth, start < limit, limit <= bytes.count, start + 2 <= limit else { return nil }
        let tag = bytes[start]
        guard tag & 0x1F != 0x1F else { return nil }  // high tag numbers: none in CMS
        let first = bytes[start + 1]
        var index = start + 2
        if first == 0x80 {
            // Indefinite: constructed only, children until the end-of-contents octets.
            guard tag & 0x20 != 0 else { return nil }
            var cursor = index
            while true {
                guard cursor + 2 <= limit else { return nil }
                if bytes[cursor] == 0, bytes[cursor + 1] == 0 { return Element(tag: tag, contents: index..<cursor, end: cursor + 2) }
                guard let child = element(at: cursor, limit: limit, depth: depth + 1) else { return nil }
                cursor = child.end
            }
        }
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            let count = Int(first & 0x7F)
            guard (1...4).contains(count), limit - index >= count else { return nil }
            for _ in 0..<count {
                length = length << 8 | Int(bytes[index])
                index += 1
            }
        }
        guard length <= limit - index else { return nil }
        return Element(tag: tag, contents: index..<(index + length), end: index + length)
    }

    /// The children of a constructed element, in order; nil when any is malformed.
    func children(of parent: Element, depth: Int) -> [Element]? {
        guard parent.isConstructed else { return nil }
        var children: [Element] = []
        var cursor = parent.contents.lowerBound
        while cursor < parent.contents.upperBound {
            guard let child = element(at: cursor, limit: parent.contents.upperBound, depth: depth + 1) else { return nil }
            children.append(child)
            cursor = child.end
        }
        return children
    }

    /// An OCTET STRING's bytes, primitive or constructed from pieces (as streaming signers write it).
    func octets(_ element: Element, depth: Int) -> [UInt8]? {
        switch element.tag {
        case 0x04:
            return Array(bytes[element.contents])
        case 0x24:
            guard depth < Self.maximumDepth, let pieces = children(of: element, depth: depth) else { return nil }
            var out: [UInt8] = []
            for piece in pieces {
                guard let part = octets(piece, depth: depth + 1) else { return nil }
                out += part
            }
            return out
        default:
            return nil
        }
    }
}

extension SignedData {
    /// `id-signedData` and `id-data` (RFC 5652), as their DER contents.
    private static let signedDataOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02]
    private static let dataOID: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x01]

    /// The content of a `ContentInfo` → `SignedData`, read structurally and verifying nothing:
    /// for what a receipt *claims* before Apple is asked, never for anything trusted.
    ///
    /// Unlike `content(of:)`, it does not parse the certificates (OpenSSL 3 spends most of a
    /// receipt's half millisecond decoding their keys), but it still requires the whole shape:
    /// version, digest algorithms, encapsulated `id-data` content and signer infos. Like
    /// OpenSSL's reader, it ignores bytes after the structure.
    public static func claimedContent(of bytes: [UInt8]) -> [UInt8]? {
        let reader = BERReader(bytes)
        guard let contentInfo = reader.element(at: 0, limit: bytes.count), contentInfo.tag == 0x30,
            let parts = reader.children(of: contentInfo, depth: 0), parts.count == 2,
            parts[0].tag == 0x06, reader.bytes[parts[0].contents].elementsEqual(signedDataOID),
            parts[1].tag == 0xA0, let wrapped = reader.children(of: parts[1], depth: 1), wrapped.count == 1, wrapped[0].tag == 0x30,
            let signedData = reader.children(of: wrapped[0], depth: 2), signedData.count >= 4,
            signedData[0].tag == 0x02, signedData[1].tag == 0x31, signedData[2].tag == 0x30, signedData.last?.tag == 0x31,
            signedData.dropFirst(3).dropLast().allSatisfy({ $0.tag == 0xA0 || $0.tag == 0xA1 }),
            let encapsulated = reader.children(of: signedData[2], depth: 3), encapsulated.count == 2,
            encapsulated[0].tag == 0x06, reader.bytes[encapsulated[0].contents].elementsEqual(dataOID),
            encapsulated[1].tag == 0xA0, let content = reader.children(of: encapsulated[1], depth: 4), content.count == 1
        else { return nil }
        return reader.octets(content[0], depth: 5)
    }
}

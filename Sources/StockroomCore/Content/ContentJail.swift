#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The content folder as a jail: every path handed out resolves, symbolic links followed,
/// to a regular file inside it.
///
/// Relative paths come from the catalogue (and, through it, from operators); nothing a client
/// sends is ever used as a path.
public struct ContentJail: Sendable {
    /// The content folder with every symbolic link resolved.
    public let root: String

    /// Resolves the folder once; fails when it does not exist or is not a folder.
    public init(folder: String) throws(ContentPathError) {
        guard let resolved = Self.realPath(folder) else { throw .missingFolder(folder) }
        var status = stat()
        guard stat(resolved, &status) == 0, (status.st_mode & S_IFMT) == S_IFDIR else {
            throw .missingFolder(folder)
        }
        self.root = resolved
    }

    /// The absolute, symlink-free path of `relativePath`, checked to stay inside the folder
    /// and to name a regular file. Blocking (stat, realpath): call off the event loop.
    public func resolve(_ relativePath: String) throws(ContentPathError) -> String {
        guard !relativePath.isEmpty, !relativePath.utf8.contains(0) else { throw .invalid(relativePath) }
        guard !relativePath.hasPrefix("/") else { throw .absolute(relativePath) }
        let components = relativePath.split(separator: "/", omittingEmptySubsequences: true)
        guard !components.contains("..") else { throw .traversal(relativePath) }
        let candidate = root + "/" + relativePath
        guard let resolved = Self.realPath(candidate) else { throw .missing(relativePath) }
        guard resolved.hasPrefix(root == "/" ? "/" : root + "/") else { throw .escapes(relativePath) }
        var status = stat()
        guard stat(resolved, &status) == 0 else { throw .missing(relativePath) }
        guard (status.st_mode & S_IFMT) == S_IFREG else { throw .notAFile(relativePath) }
        return resolved
    }

    private static func realPath(_ path: String) -> String? {
        guard let pointer = realpath(path, nil) else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }
}

/// Why a content path was refused.
public enum ContentPathError: Error, Equatable, CustomStringConvertible {
    case missingFolder(String)
    case invalid(String)
    case absolute(String)
    case traversal(String)
    case escapes(String)
    case missing(String)
    case notAFile(String)

    public var description: String {
        switch self {
        case .missingFolder(let path): "content folder \"\(path)\" does not exist or is not a folder"
        case .invalid(let path): "file path \"\(path)\" is empty or contains a NUL byte"
        case .absolute(let path): "file \"\(path)\" is an absolute path; paths are relative to the content folder"
        case .traversal(let path): "file \"\(path)\" uses \"..\" to leave the content folder"
        case .escapes(let path): "file \"\(path)\" leads outside the content folder (through a symbolic link)"
        case .missing(let path): "file \"\(path)\" does not exist in the content folder"
        case .notAFile(let path): "file \"\(path)\" is not a regular file"
        }
    }
}

/// A small extension → MIME type table for the kinds of content apps sell.
public enum MediaTypes {
    private static let byExtension: [String: String] = [
        "epub": "application/epub+zip", "pdf": "application/pdf", "zip": "application/zip",
        "json": "application/json", "txt": "text/plain; charset=utf-8", "mp3": "audio/mpeg",
        "m4a": "audio/mp4", "mp4": "video/mp4", "png": "image/png", "jpg": "image/jpeg",
        "jpeg": "image/jpeg", "bin": "application/octet-stream", "pak": "application/octet-stream",
    ]

    /// The MIME type for `path`'s extension, or `application/octet-stream`.
    public static func guess(forPath path: String) -> String {
        guard let dot = path.lastIndex(of: "."), !path[dot...].contains("/") else { return "application/octet-stream" }
        return byExtension[path[path.index(after: dot)...].lowercased()] ?? "application/octet-stream"
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Where the engine's one-time notices go. By default they are written to standard error; the
/// Python package installs a handler that turns them into Python warnings.
public enum Warnings {
    /// Receives each notice's text.
    public typealias Handler = @Sendable (String) -> Void

    private static let lock = Lock()
    nonisolated(unsafe) private static var handler: Handler = standardError

    private static let standardError: Handler = { message in
        let line = "lucid: warning: \(message)\n"
        _ = line.withCString { write(2, $0, strlen($0)) }
    }

    /// Replaces the handler; returns the previous one.
    @discardableResult
    public static func setHandler(_ new: @escaping Handler) -> Handler {
        lock.withLock {
            let old = handler
            handler = new
            return old
        }
    }

    /// Restores the default handler (standard error).
    public static func resetHandler() { setHandler(standardError) }

    static func emit(_ message: String) {
        let h = lock.withLock { handler }
        h(message)
    }
}

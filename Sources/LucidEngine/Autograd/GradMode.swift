#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Whether ops record the backward graph on the calling thread (`lucid.no_grad` turns it off).
/// Kept in thread-local storage as a plain flag, so reading it allocates nothing.
public enum GradMode {
    private static let key: pthread_key_t = {
        var k = pthread_key_t()
        pthread_key_create(&k, nil)
        return k
    }()

    /// Grad mode for the calling thread; a new thread starts with it on.
    public static var isEnabled: Bool {
        pthread_getspecific(key) == nil  // the slot holds a marker only while grad is off
    }

    /// Sets grad mode for the calling thread and returns the previous setting.
    @discardableResult
    public static func set(_ enabled: Bool) -> Bool {
        let previous = isEnabled
        pthread_setspecific(key, enabled ? nil : UnsafeRawPointer(bitPattern: 1))
        return previous
    }

    /// Runs `body` with grad mode set to `enabled`, restoring the previous setting after.
    public static func with<R>(_ enabled: Bool, _ body: () throws -> R) rethrows -> R {
        let previous = set(enabled)
        defer { set(previous) }
        return try body()
    }
}

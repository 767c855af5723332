#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The value of an environment variable, or nil.
func environmentValue(_ name: String) -> String? {
    guard let p = getenv(name) else { return nil }
    return String(cString: p)
}

/// A mutual-exclusion lock over pthreads, usable on every platform the engine builds for.
package final class Lock: @unchecked Sendable {
    @usableFromInline package let mutex: UnsafeMutablePointer<pthread_mutex_t>

    package init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    // Inlinable, so that callers in other modules (the C ABI's handle table) get it specialised
    // instead of calling the generic version.
    @inlinable @inline(__always)
    package func withLock<R>(_ body: () throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Testing
@testable import LucidEngine

// Helpers shared by AutocastTests, TensorTests and CABITests.

/// Carries a closure and its result across a pthread boundary.
private final class JoinedThreadBox: @unchecked Sendable {
    let body: () -> Void
    init(_ body: @escaping () -> Void) { self.body = body }
}

/// Holds a value produced on another thread.
private final class JoinedThreadResult<T>: @unchecked Sendable {
    var value: T?
}

/// Runs `body` on a brand-new OS thread and returns its result once the thread has fully
/// terminated (`pthread_join`), so every thread-local destructor has already run.
func runOnJoinedThread<T>(_ body: @escaping () -> T) -> T {
    let result = JoinedThreadResult<T>()
    let box = JoinedThreadBox { result.value = body() }
    let context = Unmanaged.passRetained(box).toOpaque()
    #if canImport(Glibc)
    var tid = pthread_t()
    #else
    var tid: pthread_t? = nil
    #endif
    let rc = pthread_create(
        &tid, nil,
        { value in
            // Darwin passes the argument as non-optional, Glibc as optional: bind it either way.
            let raw: UnsafeMutableRawPointer? = value
            guard let raw else { return nil }
            Unmanaged<JoinedThreadBox>.fromOpaque(raw).takeRetainedValue().body()
            return nil
        }, context)
    precondition(rc == 0, "pthread_create failed with \(rc)")
    #if canImport(Glibc)
    pthread_join(tid, nil)
    #else
    pthread_join(tid!, nil)
    #endif
    return result.value!
}

/// The kind of the `LucidError` that `body` throws, or nil when it throws nothing (or throws
/// something that is not a `LucidError`).
func lucidErrorKind(_ body: () throws -> Void) -> LucidError.Kind? {
    do {
        try body()
        return nil
    } catch let e as LucidError {
        return e.kind
    } catch {
        return nil
    }
}

/// The `LucidError` that `body` throws, or nil.
func lucidError(_ body: () throws -> Void) -> LucidError? {
    do {
        try body()
        return nil
    } catch let e as LucidError {
        return e
    } catch {
        return nil
    }
}

/// Reference arithmetic in Double, independent of the engine.
enum Reference {
    /// Row-major [m, k] · [k, n] accumulated in Double.
    static func matmul(_ a: [Double], _ b: [Double], m: Int, k: Int, n: Int) -> [Double] {
        var out = [Double](repeating: 0, count: m * n)
        for i in 0..<m {
            for j in 0..<n {
                var acc = 0.0
                for l in 0..<k { acc += a[i * k + l] * b[l * n + j] }
                out[i * n + j] = acc
            }
        }
        return out
    }

    /// Row-major strides of `shape`.
    static func strides(_ shape: [Int]) -> [Int] {
        var s = [Int](repeating: 1, count: shape.count)
        var acc = 1
        for i in stride(from: shape.count - 1, through: 0, by: -1) {
            s[i] = acc
            acc *= shape[i]
        }
        return s
    }

    /// The multi-index of flat position `flat` in `shape`.
    static func index(_ flat: Int, _ shape: [Int]) -> [Int] {
        var rest = flat
        var idx = [Int](repeating: 0, count: shape.count)
        for i in stride(from: shape.count - 1, through: 0, by: -1) {
            idx[i] = rest % shape[i]
            rest /= shape[i]
        }
        return idx
    }

    /// Nearest float16 to `x` (ties to even), as a Float.
    static func roundToHalf(_ x: Float) -> Float {
        #if arch(x86_64) && os(macOS)
        fatalError("Float16 is unavailable here")
        #else
        return Float(Float16(x))
        #endif
    }

    /// Nearest bfloat16 to `x` (ties to even), as a Float. Finite inputs only.
    static func roundToBFloat16(_ x: Float) -> Float {
        let bits = x.bitPattern
        let lsb = (bits >> 16) & 1
        let rounded = (bits &+ 0x7fff &+ lsb) & 0xffff_0000
        return Float(bitPattern: rounded)
    }

    /// A deterministic pseudo-random sequence in [-1, 1), so the tests need no engine RNG.
    static func values(_ count: Int, seed: UInt64) -> [Float] {
        var state = seed &* 0x9E37_79B9_7F4A_7C15 | 1
        return (0..<count).map { _ in
            state = state &* 6364136223846793005 &+ 1442695040888963407
            let top = Double(state >> 11) / Double(1 << 53)
            return Float(top * 2 - 1)
        }
    }
}

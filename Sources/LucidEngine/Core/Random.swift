#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process-wide random generator behind rand and randn, reseeded by `manualSeed`.
/// Draws are serialised, so concurrent factories never share or corrupt state.
struct RandomSource {
    private var s: (UInt64, UInt64, UInt64, UInt64)

    init(seed: UInt64) {
        // splitmix64 spreads the seed over xoshiro256**'s state.
        var z = seed
        func next() -> UInt64 {
            z &+= 0x9E37_79B9_7F4A_7C15
            var x = z
            x = (x ^ (x >> 30)) &* 0xBF58_476D_1CE4_E5B9
            x = (x ^ (x >> 27)) &* 0x94D0_49BB_1331_11EB
            return x ^ (x >> 31)
        }
        s = (next(), next(), next(), next())
    }

    mutating func next() -> UInt64 {
        let result = ((s.1 &* 5) << 7 | (s.1 &* 5) >> 57) &* 9
        let t = s.1 << 17
        s.2 ^= s.0
        s.3 ^= s.1
        s.1 ^= s.2
        s.0 ^= s.3
        s.2 ^= t
        s.3 = (s.3 << 45) | (s.3 >> 19)
        return result
    }

    /// Uniform in [0, 1) on a grid of 2^-bits, so that a dtype with `bits` significand bits
    /// holds every draw exactly and never rounds one up to 1.
    mutating func nextUniform(bits: Int = 24) -> Double {
        Double(next() >> UInt64(64 - bits)) * Double(sign: .plus, exponent: -bits, significand: 1)
    }

    /// Standard normal (Box–Muller).
    mutating func nextNormal() -> Double {
        let u1 = (Double(next() >> 11) + 1) * 0x1p-53  // (0, 1]
        let u2 = Double(next() >> 11) * 0x1p-53
        return (-2 * log(u1)).squareRoot() * cos(2 * Double.pi * u2)
    }
}

/// The shared generator.
public final class Random: @unchecked Sendable {
    static let global = Random(seed: 0x5EED)

    private let lock = Lock()
    private var source: RandomSource

    init(seed: UInt64) { source = RandomSource(seed: seed) }

    /// Reseeds the generator every factory draws from.
    public static func manualSeed(_ seed: UInt64) {
        global.lock.withLock { global.source = RandomSource(seed: seed) }
    }

    /// `n` draws, in order, each converted by `one` to the element type the caller stores.
    @inline(__always)
    func draw<T>(_ n: Int, _ one: (inout RandomSource) -> T) -> [T] {
        lock.withLock {
            var state = source  // in registers while drawing, not in this object's memory
            defer { source = state }
            return [T](unsafeUninitializedCapacity: n) { buffer, count in
                for i in 0..<n { (buffer.baseAddress! + i).initialize(to: one(&state)) }
                count = n
            }
        }
    }
}

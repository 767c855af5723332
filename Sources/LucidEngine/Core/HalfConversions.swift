// Bit-exact conversions between float32 and the two 16-bit float formats.
//
// float32 -> float16 / bfloat16 rounds to nearest, ties to even, keeps subnormals, and maps
// overflow to infinity. NaNs follow the reference libraries bit for bit: float16 keeps the
// top ten payload bits (numpy's rule, forcing a non-zero payload so the NaN stays a NaN);
// bfloat16 becomes the canonical quiet NaN with the sign kept (ml_dtypes' rule).
// The widening conversions are exact.

/// float32 bits -> float16 bits, round to nearest even.
@inline(__always)
func float16Bits(fromFloat32Bits f: UInt32) -> UInt16 {
    let sign = UInt16(truncatingIfNeeded: (f >> 16) & 0x8000)
    let exponent = Int((f >> 23) & 0xff)
    let mantissa = f & 0x7f_ffff
    if exponent == 0xff {
        if mantissa == 0 { return sign | 0x7c00 }
        let payload = UInt16(truncatingIfNeeded: mantissa >> 13)
        return sign | 0x7c00 | (payload == 0 ? 1 : payload)
    }
    let e = exponent - 112  // float16 biased exponent
    if e >= 31 { return sign | 0x7c00 }
    if e <= 0 {
        // Subnormal (or zero) in float16: the value is full * 2^(e - 38), and a float16
        // subnormal is q * 2^-24, so q is full shifted right by 14 - e bits.
        if e < -10 { return sign }
        let full = mantissa | 0x80_0000
        let shift = UInt32(14 - e)
        var q = full >> shift
        let rest = full & ((1 << shift) - 1)
        let half = UInt32(1) << (shift - 1)
        if rest > half || (rest == half && (q & 1) == 1) { q += 1 }
        return sign | UInt16(truncatingIfNeeded: q)
    }
    var q = (UInt32(e) << 10) | (mantissa >> 13)
    let rest = mantissa & 0x1fff
    if rest > 0x1000 || (rest == 0x1000 && (q & 1) == 1) { q += 1 }  // may carry into inf: correct
    return sign | UInt16(truncatingIfNeeded: q)
}

/// float16 bits -> float32 bits, exact.
@inline(__always)
func float32Bits(fromFloat16Bits h: UInt16) -> UInt32 {
    let sign = UInt32(h & 0x8000) << 16
    let exponent = UInt32((h >> 10) & 0x1f)
    let mantissa = UInt32(h & 0x3ff)
    if exponent == 0x1f { return sign | 0x7f80_0000 | (mantissa << 13) }
    if exponent == 0 {
        // mantissa * 2^-24 is exact in float32.
        return sign | (Float(mantissa) * 0x1p-24).bitPattern
    }
    return sign | ((exponent + 112) << 23) | (mantissa << 13)
}

/// float32 bits -> bfloat16 bits, round to nearest even.
@inline(__always)
func bfloat16Bits(fromFloat32Bits f: UInt32) -> UInt16 {
    if (f & 0x7fff_ffff) > 0x7f80_0000 { return (f & 0x8000_0000) != 0 ? 0xffc0 : 0x7fc0 }
    let rounded = f &+ 0x7fff &+ ((f >> 16) & 1)
    return UInt16(truncatingIfNeeded: rounded >> 16)
}

/// bfloat16 bits -> float32 bits, exact.
@inline(__always)
func float32Bits(fromBFloat16Bits b: UInt16) -> UInt32 { UInt32(b) << 16 }

/// `v` as a float32 rounded to odd: exact when it fits, otherwise truncated with the last bit
/// set. Rounding that to a 16-bit float (to nearest even) is the correctly rounded result of
/// `v` itself, with no double-rounding error.
@inline(__always)
func roundedToOddFloat(_ v: Int64) -> Float {
    let m = v.magnitude
    if m < (1 << 24) { return Float(v) }
    let shift = (64 - m.leadingZeroBitCount) - 24
    var top = m >> UInt64(shift)
    if m & ((1 << UInt64(shift)) - 1) != 0 { top |= 1 }
    let f = Float(top) * Float(sign: .plus, exponent: shift, significand: 1)
    return v < 0 ? -f : f
}

/// `d` as a float32 rounded to odd (see the integer form).
@inline(__always)
func roundedToOddFloat(_ d: Double) -> Float {
    var f = Float(d)
    guard d.isFinite, f.isFinite, Double(f) != d else { return f }
    if abs(Double(f)) > abs(d) { f = f > 0 ? f.nextDown : f.nextUp }  // toward zero
    return Float(bitPattern: f.bitPattern | 1)
}

@inline(__always) func halfToFloat(_ h: UInt16) -> Float { Float(bitPattern: float32Bits(fromFloat16Bits: h)) }
@inline(__always) func floatToHalf(_ x: Float) -> UInt16 { float16Bits(fromFloat32Bits: x.bitPattern) }
@inline(__always) func bfloatToFloat(_ b: UInt16) -> Float { Float(bitPattern: UInt32(b) << 16) }
@inline(__always) func floatToBFloat(_ x: Float) -> UInt16 { bfloat16Bits(fromFloat32Bits: x.bitPattern) }

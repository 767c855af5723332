#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Factories: full (zeros, ones), arange, rand, randn.
package enum Creation {
    /// Values computed on the host (ranges, random draws, pooling matrices) are staged in Swift
    /// arrays, whose allocation traps when the memory is not there. Staging more than the
    /// machine's physical memory is refused up front, so such a size is an error, not a crash.
    static func reserveStaging(_ count: Int, bytesEach: Int) throws {
        let (bytes, overflow) = count.multipliedReportingOverflow(by: bytesEach)
        guard !overflow, bytes <= physicalMemory else {
            throw LucidError.runtime(
                "out of memory: \(count) values would need \(bytes) bytes of staging, "
                    + "more than the machine's \(physicalMemory)")
        }
    }

    static let physicalMemory: Int = {
        let pages = sysconf(Int32(_SC_PHYS_PAGES)), size = sysconf(Int32(_SC_PAGESIZE))
        return pages > 0 && size > 0 ? pages.multipliedReportingOverflow(by: size).partialValue : Int.max
    }()

    package static func full(_ shape: [Int], value: ScalarOperand, dtype: DType, device: Device) throws -> TensorImpl {
        try device.check(dtype, op: "full")
        let fill = try scalar(value, for: dtype)
        let out = try TensorImpl.empty(shape, dtype: dtype, on: try Backends.backend(for: device))
        out.backend.fill(out, with: fill)
        return out
    }

    /// `value` as the scalar a fill of a `dtype` tensor writes: refused where it cannot be
    /// represented; a bool holds whether the value is nonzero (NaN and 0.5 are true), not its
    /// truncation.
    static func scalar(_ value: ScalarOperand, for dtype: DType) throws -> Scalar {
        try checkRepresentable(value, in: dtype)
        return dtype == .bool && value.kind == .float ? Scalar(int: value.value.double != 0 ? 1 : 0) : value.value
    }

    /// An integer tensor cannot hold NaN, an infinity or a value beyond its range: filling one
    /// with such a value is refused (as PyTorch does) instead of storing an arbitrary integer.
    /// As in PyTorch, a float below the type's lowest value is refused and one above its
    /// largest only when its truncation is (255.5 fills uint8 with 255), and uint8 takes the
    /// integers down to -255, wrapped (-1 is 255).
    static func checkRepresentable(_ value: ScalarOperand, in dtype: DType) throws {
        guard let range = dtype.integerRange else { return }
        let fits: Bool
        if value.kind == .float {
            let v = value.value.double
            // 2^63 is the first double above int64's range.
            let high = dtype == .int64 ? v < 9.223_372_036_854_775_808e18 : v.rounded(.towardZero) <= Double(range.upperBound)
            fits = !v.isNaN && v >= Double(range.lowerBound) && high
        } else {
            let i = value.value.int
            fits = dtype == .uint8 ? (-255...255).contains(i) : range.contains(i)
        }
        guard fits else {
            throw LucidError.value(
                "fill value \(value.kind == .float ? "\(value.value.double)" : "\(value.value.int)") cannot be converted to \(dtype) without overflow"
            )
        }
    }

    /// Values `start, start + step, …` below `end` (above it for a negative step), computed in
    /// float64. float32 unless `dtype` says otherwise.
    package static func arange(start: Double, end: Double, step: Double, dtype: DType?, device: Device) throws -> TensorImpl {
        guard step != 0 else { throw LucidError.value("arange: step must be nonzero") }
        guard start.isFinite, end.isFinite, step.isFinite else {
            throw LucidError.value("arange: start, end and step must be finite, got \(start), \(end), \(step)")
        }
        guard (step > 0 && end >= start) || (step < 0 && end <= start) else {
            throw LucidError.value("arange: the range [\(start), \(end)) is inconsistent with step \(step)")
        }
        let count = ((end - start) / step).rounded(.up)
        guard count <= Double(Shape.maxElements) else { throw LucidError.value("arange: \(count) elements are too many") }
        let n = Int(count)
        let type = dtype ?? .float32
        try device.check(type, op: "arange")
        try reserveStaging(n, bytesEach: 12)  // float64 values, then their float32 roundings
        let values = (0..<n).map { start + Double($0) * step }
        return try fromDoubles(values, shape: [n], dtype: type, device: device)
    }

    /// Integer `start, start + step, …` below `end` (above it for a negative step), computed in
    /// int64 so that large bounds stay exact. int64 unless `dtype` says otherwise.
    package static func arange(start: Int64, end: Int64, step: Int64, dtype: DType?, device: Device) throws -> TensorImpl {
        guard step != 0 else { throw LucidError.value("arange: step must be nonzero") }
        guard (step > 0 && end >= start) || (step < 0 && end <= start) else {
            throw LucidError.value("arange: the range [\(start), \(end)) is inconsistent with step \(step)")
        }
        let (span, overflow) = end.subtractingReportingOverflow(start)
        let magnitude = overflow ? UInt64.max : span.magnitude
        let stepMagnitude = step.magnitude
        let count = magnitude / stepMagnitude + (magnitude % stepMagnitude == 0 ? 0 : 1)
        guard !overflow, count <= UInt64(Shape.maxElements) else {
            throw LucidError.value("arange: the range [\(start), \(end)) with step \(step) has too many elements")
        }
        let n = Int(count)
        try device.check(dtype ?? .int64, op: "arange")
        try reserveStaging(n, bytesEach: 8)
        let values = (0..<n).map { start &+ Int64($0) &* step }
        let staged = try TensorImpl.empty([n], dtype: .int64, on: try Backends.backend(for: device))
        values.withUnsafeBytes { staged.backend.write($0, into: staged) }
        return try Ops.cast(staged, to: dtype ?? .int64)
    }

    package static func rand(_ shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        let bits = dtype == .float16 ? 11 : (dtype == .bfloat16 ? 8 : (dtype == .float64 ? 53 : 24))
        return try random(shape, dtype: dtype, device: device, op: "rand") { $0.nextUniform(bits: bits) }
    }

    package static func randn(_ shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        try random(shape, dtype: dtype, device: device, op: "randn") { $0.nextNormal() }
    }

    @inline(__always)
    private static func random(
        _ shape: [Int], dtype: DType, device: Device, op: String,
        _ draw: (inout RandomSource) -> Double
    ) throws -> TensorImpl {
        guard dtype.isFloatingPoint else {
            throw LucidError.type("\(op): dtype must be floating point, got \(dtype)")
        }
        try device.check(dtype, op: op)
        let n = try Shape.numel(shape)
        // The draws, then the float32 (float64) tensor they are written into.
        if dtype == .float64 {
            try reserveStaging(n, bytesEach: 16)
            return try fromDoubles(Random.global.draw(n, draw), shape: shape, dtype: dtype, device: device)
        }
        // Each draw rounded once to float32 as it is made (to odd for the 16-bit floats, which
        // round from there once more), staged and converted as fromDoubles does.
        try reserveStaging(n, bytesEach: 8)
        let floats: [Float] =
            dtype.isLowPrecision
            ? Random.global.draw(n) { roundedToOddFloat(draw(&$0)) } : Random.global.draw(n) { Float(draw(&$0)) }
        return try fromFloats(floats, shape: shape, dtype: dtype, device: device)
    }

    /// Builds a tensor from float64 values, rounding once to `dtype` (through float32 rounded
    /// to odd for the 16-bit floats).
    static func fromDoubles(_ values: [Double], shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        let backend = try Backends.backend(for: device)
        if dtype == .float64 {
            let out = try TensorImpl.empty(shape, dtype: .float64, on: backend)
            values.withUnsafeBytes { backend.write($0, into: out) }
            return out
        }
        if !dtype.isFloatingPoint {
            let ints = values.map { v -> Int64 in v.isFinite ? Int64(v.rounded(.towardZero)) : 0 }
            let staged = try TensorImpl.empty(shape, dtype: .int64, on: backend)
            ints.withUnsafeBytes { backend.write($0, into: staged) }
            return try Ops.cast(staged, to: dtype)
        }
        let floats = dtype.isLowPrecision ? values.map { roundedToOddFloat($0) } : values.map { Float($0) }
        return try fromFloats(floats, shape: shape, dtype: dtype, device: device)
    }

    /// Builds a tensor of a floating `dtype` other than float64 from float32 values already
    /// rounded from float64 (to odd for the 16-bit floats, which round once more here).
    private static func fromFloats(_ floats: [Float], shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        let backend = try Backends.backend(for: device)
        let staged = try TensorImpl.empty(shape, dtype: .float32, on: backend)
        floats.withUnsafeBytes { backend.write($0, into: staged) }
        return try Ops.cast(staged, to: dtype)
    }
}

/// Factories: full (zeros, ones), arange, rand, randn.
package enum Creation {
    package static func full(_ shape: [Int], value: ScalarOperand, dtype: DType, device: Device) throws -> TensorImpl {
        let out = try TensorImpl.empty(shape, dtype: dtype, on: try Backends.backend(for: device))
        out.backend.fill(out, with: value.value)
        return out
    }

    /// Values `start, start + step, …` below `end` (above it for a negative step). With no
    /// dtype: int64 when every argument is an integer, float32 otherwise.
    package static func arange(start: Double, end: Double, step: Double, integral: Bool, dtype: DType?, device: Device) throws -> TensorImpl {
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
        let type = dtype ?? (integral ? .int64 : .float32)
        let values = (0..<n).map { start + Double($0) * step }
        return try fromDoubles(values, shape: [n], dtype: type, device: device)
    }

    package static func rand(_ shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        try random(shape, dtype: dtype, device: device, op: "rand") { $0.nextUniform() }
    }

    package static func randn(_ shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        try random(shape, dtype: dtype, device: device, op: "randn") { $0.nextNormal() }
    }

    private static func random(_ shape: [Int], dtype: DType, device: Device, op: String,
                               _ draw: (inout RandomSource) -> Double) throws -> TensorImpl {
        guard dtype.isFloatingPoint else {
            throw LucidError.type("\(op): dtype must be floating point, got \(dtype)")
        }
        let n = try Shape.numel(shape)
        let values = Random.global.draw(n, draw)
        return try fromDoubles(values, shape: shape, dtype: dtype, device: device)
    }

    /// Builds a tensor from float64 values: float32 first (one rounding), then `dtype`.
    static func fromDoubles(_ values: [Double], shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        let backend = try Backends.backend(for: device)
        if !dtype.isFloatingPoint {
            let ints = values.map { v -> Int64 in v.isFinite ? Int64(v.rounded(.towardZero)) : 0 }
            let staged = try TensorImpl.empty(shape, dtype: .int64, on: backend)
            ints.withUnsafeBytes { backend.write($0, into: staged) }
            return try Ops.cast(staged, to: dtype)
        }
        let floats = values.map { Float($0) }
        let staged = try TensorImpl.empty(shape, dtype: .float32, on: backend)
        floats.withUnsafeBytes { backend.write($0, into: staged) }
        return try Ops.cast(staged, to: dtype)
    }
}

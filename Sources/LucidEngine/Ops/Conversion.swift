/// Moving tensors between dtypes, devices and host memory.
package enum Conversion {
    static let to = OpInfo("to", .view)

    /// `a` with another dtype and/or on another device (itself when nothing changes).
    package static func to(_ a: TensorImpl, dtype: DType?, device: Device?) throws -> TensorImpl {
        try (device ?? a.device).check(dtype ?? a.dtype, op: "to")
        var t = a
        if let dtype { t = try Ops.cast(t, to: dtype) }
        if let device, device != t.device {
            let target = try Backends.backend(for: device)
            let src = try Ops.contiguous(t)
            let out = try TensorImpl.empty(src.shape, dtype: src.dtype, on: target)
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(src.numel * src.dtype.itemSize, 1), alignment: 64)
            defer { bytes.deallocate() }
            try src.backend.readChecked(src, into: bytes)
            target.write(UnsafeRawBufferPointer(bytes), into: out)
            let source = t.device
            t = Autograd.record(out, Autograd.name(to), [src]) { g in [try Conversion.to(g, dtype: nil, device: source)] }
        }
        return t
    }

    /// A new tensor holding a copy of `bytes`, which are `shape`'s elements of `dtype` in
    /// row-major order.
    package static func fromHost(_ bytes: UnsafeRawBufferPointer, shape: [Int], dtype: DType, device: Device) throws -> TensorImpl {
        let n = try Shape.numel(shape)
        guard bytes.count == n * dtype.itemSize else {
            throw LucidError.value("expected \(n * dtype.itemSize) bytes for \(n) \(dtype.name) elements of shape \(shape), got \(bytes.count)")
        }
        if n > 0 && bytes.baseAddress == nil { throw LucidError.value("data pointer is null") }
        try device.check(dtype, op: "tensor")
        let out = try TensorImpl.empty(shape, dtype: dtype, on: try Backends.backend(for: device))
        out.backend.write(bytes, into: out)
        return out
    }

    /// Copies `a`'s elements, row-major, into `bytes` (exactly numel × itemSize of them).
    package static func toHost(_ a: TensorImpl, _ bytes: UnsafeMutableRawBufferPointer) throws {
        let need = a.numel * a.dtype.itemSize
        guard bytes.count == need else {
            throw LucidError.value("expected a buffer of \(need) bytes for a \(a.dtype.name) tensor of shape \(a.shape), got \(bytes.count)")
        }
        if need > 0 && bytes.baseAddress == nil { throw LucidError.value("output pointer is null") }
        let src = try Ops.contiguous(a)
        try src.backend.readChecked(src, into: bytes)
    }
}

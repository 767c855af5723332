/// The op layer: one definition per op (shape rule, dtype rule, autocast policy), applied
/// before a backend kernel runs. Both the Swift `Tensor` API and the C ABI call these.
package enum Ops {
    /// Every op's declaration; `OpTable` serves it to Python and Swift.
    static let declarations: [OpInfo] =
        [] + Elementwise.binaryInfos + Elementwise.unaryInfos + Comparison.infos + [
            LinearAlgebra.matmul, LinearAlgebra.linear,
            Reductions.sum, Reductions.mean,
        ] + Reductions.extraInfos + [
            ShapeOps.reshape, ShapeOps.view, ShapeOps.transpose, ShapeOps.permute, ShapeOps.contiguous,
        ] + ShapeOps.extraInfos + Indexing.infos + Activations.infos + Normalization.infos + Convolution.infos
        + Attention.infos + Losses.infos + Recurrent.infos + Linalg.infos + [
            Conversion.to
        ]

    /// A 0-d tensor holding a Python-style scalar in `dtype`, for ops whose kernels take
    /// tensors only (the scalar has already taken part in choosing `dtype`).
    static func scalarTensor(_ s: ScalarOperand, dtype: DType, device: Device) throws -> TensorImpl {
        try Creation.full([], value: s, dtype: dtype, device: device)
    }

    /// Throws unless every tensor is on one device.
    /// Two operands on one device (without the array of the general form).
    static func checkSameDevice(_ op: String, _ a: TensorImpl, _ b: TensorImpl) throws {
        if a.device != b.device {
            throw LucidError.runtime("\(op): expected all tensors on one device, got \(a.device) and \(b.device)")
        }
    }

    static func checkSameDevice(_ op: String, _ tensors: [TensorImpl]) throws {
        guard let first = tensors.first else { return }
        for t in tensors.dropFirst() where t.device != first.device {
            throw LucidError.runtime("\(op): expected all tensors on one device, got \(first.device) and \(t.device)")
        }
    }

    /// `t` converted to `dtype` on its own device (itself when it already has that dtype).
    /// The gradient flows back converted to `t`'s dtype.
    static func cast(_ t: TensorImpl, to dtype: DType) throws -> TensorImpl {
        if t.dtype == dtype { return t }
        let out = try TensorImpl.empty(t.shape, dtype: dtype, on: t.backend)
        t.backend.copy(t, into: out)
        let from = t.dtype
        return Autograd.record(out, "ToCopyBackward", [t], savesNothing: true) { g in [try cast(g, to: from)] }
    }

    /// `t` itself when contiguous, else a contiguous copy.
    package static func contiguous(_ t: TensorImpl) throws -> TensorImpl {
        t.isContiguous ? t : try clone(t)
    }

    /// `t` itself when contiguous or one value everywhere (every stride 0, as a full sum's
    /// gradient is), else a contiguous copy: the gradient operand of the fused backward
    /// kernels, which read such a value without a full tensor of it.
    static func contiguousOrSplat(_ t: TensorImpl) throws -> TensorImpl {
        t.isContiguous || t.strides.allSatisfy({ $0 == 0 }) ? t : try clone(t)
    }

    /// `t` itself when contiguous, else a row-major copy made outside the graph (for kernels
    /// that need a dense operand and record nothing: optimizer steps, inspection's counts).
    static func dense(_ t: TensorImpl) throws -> TensorImpl {
        if t.isContiguous { return t }
        let out = try TensorImpl.empty(t.shape, dtype: t.dtype, on: t.backend)
        if out.numel > 0 { t.backend.copy(t, into: out) }
        return out
    }

    /// A row-major copy of `t` in storage of its own.
    package static func clone(_ t: TensorImpl) throws -> TensorImpl {
        let out = try TensorImpl.empty(t.shape, dtype: t.dtype, on: t.backend)
        if out.numel > 0 { t.backend.copy(t, into: out) }
        return Autograd.record(out, "CloneBackward", [t]) { g in [g] }
    }
}

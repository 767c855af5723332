/// Comparisons (bool results, no gradient), `where` and `clamp`.
package enum Comparison {
    static let compareInfos: [OpInfo] = CompareKernel.allCases.map { OpInfo("\($0)", .none) }
    private static let compareInfoByKernel = Dictionary(uniqueKeysWithValues: zip(CompareKernel.allCases, compareInfos))
    static let whereOp = OpInfo("where", .none)
    static let clamp = OpInfo("clamp", .none)
    static let infos = compareInfos + [whereOp, clamp]

    /// `a op b` elementwise as bool, compared in the promoted dtype.
    package static func compare(_ k: CompareKernel, _ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        try Ops.checkSameDevice(k.name, a, b)
        return try compareInfoByKernel[k]!.run(a, b) { a, b in try compareBody(k, a, b) }
    }

    private static func compareBody(_ k: CompareKernel, _ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        let name = k.name
        try Ops.checkSameDevice(name, a, b)
        let dtype = Elementwise.resultType(a, b)
        let shape = try Shape.broadcast(a.shape, b.shape, op: name)
        let x = try GradMode.with(false) { try Ops.cast(a, to: dtype) }
        let y = try GradMode.with(false) { try Ops.cast(b, to: dtype) }
        let out = try TensorImpl.empty(shape, dtype: .bool, like: x)
        let (xs, ys) = (x.expanded(to: shape), y.expanded(to: shape))
        out.run(ElementwiseKernels.self, KernelCall(.compare(k), reads: [xs, ys], writes: [out]), name) {
            $0.compare(k, xs, ys, into: out)
        }
        return out
    }

    /// `a op s` (or `s op a` when `scalarFirst`), the scalar converted to the promoted dtype;
    /// an integer scalar compared with an integer tensor wraps to its width, as PyTorch
    /// converts it (`uint8 == 456` compares with 200).
    package static func compare(
        _ k: CompareKernel, _ a: TensorImpl, scalar: ScalarOperand,
        scalarFirst: Bool = false
    ) throws -> TensorImpl {
        let dtype = Elementwise.resultType(a, scalar)
        let wrapped = scalar.kind == .int && dtype.isInteger ? ScalarOperand(int: dtype.wrapping(scalar.value.int)) : scalar
        let s = try Ops.scalarTensor(wrapped, dtype: dtype, device: a.device)
        return scalarFirst ? try compare(k, s, a) : try compare(k, a, s)
    }

    private static func checkCondition(_ cond: TensorImpl) throws {
        guard cond.dtype == .bool else {
            throw LucidError.type("where: condition must be a bool tensor, got \(cond.dtype) (compare it, e.g. cond != 0)")
        }
    }

    /// `cond ? a : b` elementwise with broadcasting; gradients flow to the branch chosen.
    package static func `where`(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        try Ops.checkSameDevice(whereOp.name, [cond, a, b])
        return try whereOp.run([cond, a, b]) { t in try whereBody(t[0], t[1], t[2]) }
    }

    private static func whereBody(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        try Ops.checkSameDevice(whereOp.name, [cond, a, b])
        try checkCondition(cond)
        let dtype = Elementwise.resultType(a, b)
        let shape = try Shape.broadcast(try Shape.broadcast(cond.shape, a.shape, op: whereOp.name), b.shape, op: whereOp.name)
        let x = try Ops.cast(a, to: dtype), y = try Ops.cast(b, to: dtype)
        let out = try TensorImpl.empty(shape, dtype: dtype, like: x)
        let (cs, xs, ys) = (cond.expanded(to: shape), x.expanded(to: shape), y.expanded(to: shape))
        out.run(ElementwiseKernels.self, KernelCall(.select, reads: [cs, xs, ys], writes: [out]), "where") {
            $0.select(cs, xs, ys, into: out)
        }
        return Autograd.record(out, Autograd.name(whereOp), [x, y], saved: [cond]) { g in
            let zero = try Ops.scalarTensor(ScalarOperand(int: 0), dtype: g.dtype, device: g.device)
            return [
                try Autograd.reduce(try `where`(cond, g, zero), to: x.shape),
                try Autograd.reduce(try `where`(cond, zero, g), to: y.shape),
            ]
        }
    }

    /// `where` with a scalar in place of `a` (or of `b` when `scalarSecond`).
    package static func `where`(
        _ cond: TensorImpl, scalar: ScalarOperand, _ t: TensorImpl,
        scalarSecond: Bool = false
    ) throws -> TensorImpl {
        let s = try Ops.scalarTensor(scalar, dtype: Elementwise.resultType(t, scalar), device: t.device)
        return scalarSecond ? try `where`(cond, t, s) : try `where`(cond, s, t)
    }

    /// `where` with both branches scalars: a tensor of the condition's shape.
    package static func `where`(_ cond: TensorImpl, scalar a: ScalarOperand, scalar b: ScalarOperand) throws -> TensorImpl {
        try checkCondition(cond)
        let dtype = Elementwise.combine(a.dtype, b.dtype) ?? a.dtype
        return try `where`(
            cond, try Ops.scalarTensor(a, dtype: dtype, device: cond.device),
            try Ops.scalarTensor(b, dtype: dtype, device: cond.device))
    }

    /// Limits `a` to `[min, max]` (either may be absent). The gradient passes where
    /// `min <= a <= max`, as in PyTorch.
    package static func clamp(_ a: TensorImpl, min lo: ScalarOperand?, max hi: ScalarOperand?) throws -> TensorImpl {
        try clamp.run(a) { a in try clampBody(a, min: lo, max: hi) }
    }

    private static func clampBody(_ a: TensorImpl, min lo: ScalarOperand?, max hi: ScalarOperand?) throws -> TensorImpl {
        guard lo != nil || hi != nil else {
            throw LucidError.value("clamp: at least one of min and max must be given")
        }
        if a.dtype == .bool { throw LucidError.type("clamp: not supported for bool tensors") }
        var dtype = a.dtype
        for s in [lo, hi] { if let s { dtype = Elementwise.combine(dtype, s.dtype) ?? dtype } }
        let x = try Ops.cast(a, to: dtype)
        let out = try GradMode.with(false) { () -> TensorImpl in
            var r = x
            if let lo { r = try Elementwise.binary(.maximum, r, scalar: lo, scalarFirst: false) }
            if let hi { r = try Elementwise.binary(.minimum, r, scalar: hi, scalarFirst: false) }
            // A min above max gives max everywhere (PyTorch's rule): the minimum applied last.
            return r
        }
        return Autograd.record(out, Autograd.name(clamp), [x], saved: [x]) { g in
            var keep: TensorImpl? = nil
            for (bound, k) in [(lo, CompareKernel.ge), (hi, CompareKernel.le)] {
                guard let bound else { continue }
                let m = try compare(k, x, scalar: bound)
                keep = try keep.map { try Elementwise.binary(.mul, $0, m) } ?? m  // bool · bool is "and"
            }
            guard let keep else { return [g] }
            let zero = try Ops.scalarTensor(ScalarOperand(int: 0), dtype: g.dtype, device: g.device)
            return [try `where`(keep, g, zero)]
        }
    }
}

/// Binary arithmetic (add, sub, mul, div, pow, maximum, minimum) and the unary math ops, with
/// broadcasting and PyTorch's type promotion.
package enum Elementwise {
    static let add = OpInfo("add", .none)
    static let sub = OpInfo("sub", .none)
    static let mul = OpInfo("mul", .none)
    static let div = OpInfo("div", .none)
    /// On PyTorch's float32 autocast list.
    static let pow = OpInfo("pow", .float32)
    static let maximum = OpInfo("maximum", .none)
    static let minimum = OpInfo("minimum", .none)
    static let bitwiseAnd = OpInfo("bitwise_and", .none)
    static let bitwiseOr = OpInfo("bitwise_or", .none)
    static let bitwiseXor = OpInfo("bitwise_xor", .none)
    static let bitwiseNot = OpInfo("bitwise_not", .none)
    static let neg = OpInfo("neg", .none)
    static let relu = OpInfo("relu", .none)
    /// The binary math ops after the bitwise ones, by kernel; atan2 is on PyTorch's float32
    /// autocast list, and the rest keep their input dtype.
    static let mathInfos: [OpInfo] = (BinaryKernel.atan2.rawValue...BinaryKernel.legendrePolynomialP.rawValue).compactMap { code in
        guard let k = BinaryKernel(rawValue: code) else { return nil }
        return OpInfo(binaryName(k), k == .atan2 ? .float32 : .none)
    }

    /// The binary ops' table entries, with bitwise_not (their one unary companion).
    static let binaryInfos = [add, sub, mul, div, pow, maximum, minimum, bitwiseAnd, bitwiseOr, bitwiseXor, bitwiseNot] + mathInfos

    /// A binary op's name as Python spells it.
    static func binaryName(_ k: BinaryKernel) -> String {
        switch k {
        case .floorDivide: return "floor_divide"
        case .truncDivide: return "trunc_divide"
        case .leftShift: return "bitwise_left_shift"
        case .rightShift: return "bitwise_right_shift"
        case .bitwiseAnd: return "bitwise_and"
        case .bitwiseOr: return "bitwise_or"
        case .bitwiseXor: return "bitwise_xor"
        case .chebyshevPolynomialT: return "chebyshev_polynomial_t"
        case .chebyshevPolynomialU: return "chebyshev_polynomial_u"
        case .chebyshevPolynomialV: return "chebyshev_polynomial_v"
        case .chebyshevPolynomialW: return "chebyshev_polynomial_w"
        case .shiftedChebyshevPolynomialT: return "shifted_chebyshev_polynomial_t"
        case .shiftedChebyshevPolynomialU: return "shifted_chebyshev_polynomial_u"
        case .shiftedChebyshevPolynomialV: return "shifted_chebyshev_polynomial_v"
        case .shiftedChebyshevPolynomialW: return "shifted_chebyshev_polynomial_w"
        case .hermitePolynomialH: return "hermite_polynomial_h"
        case .hermitePolynomialHe: return "hermite_polynomial_he"
        case .laguerrePolynomialL: return "laguerre_polynomial_l"
        case .legendrePolynomialP: return "legendre_polynomial_p"
        default: return "\(k)"
        }
    }

    static func info(_ k: BinaryKernel) -> OpInfo {
        switch k {
        case .add: return add
        case .sub: return sub
        case .mul: return mul
        case .div: return div
        case .pow: return pow
        case .maximum: return maximum
        case .minimum: return minimum
        case .bitwiseAnd: return bitwiseAnd
        case .bitwiseOr: return bitwiseOr
        case .bitwiseXor: return bitwiseXor
        default:
            let name = binaryName(k)
            return mathInfos.first { $0.name == name } ?? add
        }
    }

    /// PyTorch's `combine_categories`: the dtype of a higher-priority operand group wins unless
    /// a lower-priority group is of a higher category (bool < integer < float).
    static func combine(_ higher: DType?, _ lower: DType?) -> DType? {
        guard let higher else { return lower }
        guard let lower else { return higher }
        if higher.isFloatingPoint { return higher }
        if higher == .bool || lower.isFloatingPoint { return DType.promote(higher, lower) }
        return higher
    }

    /// Result dtype of a tensor-tensor op: dimensioned tensors outrank 0-d ones.
    static func resultType(_ a: TensorImpl, _ b: TensorImpl) -> DType {
        if a.dtype == b.dtype { return a.dtype }  // the commonest case, whatever the dimensions
        var dim: DType? = nil, zero: DType? = nil
        func count(_ t: TensorImpl) {
            if t.ndim > 0 {
                dim = dim.map { DType.promote($0, t.dtype) } ?? t.dtype
            } else {
                zero = zero.map { DType.promote($0, t.dtype) } ?? t.dtype
            }
        }
        count(a)
        count(b)
        return combine(dim, zero) ?? a.dtype
    }

    /// Result dtype of a tensor-scalar op: a Python int counts as int64, a float as float32,
    /// a bool as bool, and the scalar only raises the tensor's category.
    static func resultType(_ a: TensorImpl, _ s: ScalarOperand) -> DType {
        combine(a.dtype, s.dtype) ?? a.dtype
    }

    static func checkBool(_ k: BinaryKernel, _ dtype: DType) throws {
        var name: String { info(k).name }  // only for a message
        if k.integerOnly && (dtype.isFloatingPoint || dtype == .bool) {
            throw LucidError.type("\(name): only integer tensors are supported, got \(dtype)")
        }
        if k.floatingOnly && !dtype.isFloatingPoint {
            throw LucidError.type("\(name): only floating-point tensors are supported, got \(dtype)")
        }
        if k.divides && dtype == .bool {
            throw LucidError.type("\(name): not supported for bool tensors")
        }
        if k.isBitwise && dtype.isFloatingPoint {
            throw LucidError.type("\(info(k).name): only integer and bool tensors are supported, got \(dtype)")
        }
        if k == .sub && dtype == .bool {
            throw LucidError.type("sub: subtracting bool tensors is not supported; use logical_xor (or ^) instead")
        }
        if k == .pow && dtype == .bool {
            throw LucidError.type("pow: not supported for bool tensors")
        }
    }

    /// 1 where `x > y`, ½ where they are equal, 0 elsewhere: the share of a maximum's gradient
    /// that goes to `x` (ties split evenly, as in PyTorch).
    private static func maxShare(_ x: TensorImpl, _ y: TensorImpl, larger: Bool) throws -> TensorImpl {
        let wins = try Ops.cast(try Comparison.compare(larger ? .gt : .lt, x, y), to: x.dtype)
        let ties = try Ops.cast(try Comparison.compare(.eq, x, y), to: x.dtype)
        return try binary(.add, wins, try binary(.mul, ties, scalar: ScalarOperand(float: 0.5), scalarFirst: false))
    }

    /// d(x**y)/dy = x**y · log x, taken as 0 where x is 0 (the limit for y > 0).
    private static func powExponentGrad(_ g: TensorImpl, _ x: TensorImpl, _ out: TensorImpl) throws -> TensorImpl {
        let full = try binary(.mul, try binary(.mul, g, out), try unary(.log, x))
        let zero = try Comparison.compare(.eq, x, scalar: ScalarOperand(float: 0))
        return try Comparison.where(zero, scalar: ScalarOperand(float: 0), full)
    }

    static func computeType(_ k: BinaryKernel, _ dtype: DType) -> DType {
        // True division of integers gives the default float type.
        ((k == .div || k.promotesIntegers) && !dtype.isFloatingPoint) ? .float32 : dtype
    }

    package static func binary(_ k: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl {
        let op = info(k)
        try Ops.checkSameDevice(op.name, a, b)
        return try op.run(a, b) { try binary(k, op, $0, $1) }
    }

    private static func binary(_ k: BinaryKernel, _ op: OpInfo, _ a1: TensorImpl, _ b1: TensorImpl) throws -> TensorImpl {
        let dtype = computeType(k, resultType(a1, b1))
        try checkBool(k, dtype)
        let shape = try Shape.broadcast(a1.shape, b1.shape, op: op.name)
        let x = try Ops.cast(a1, to: dtype), y = try Ops.cast(b1, to: dtype)
        let out = try TensorImpl.empty(shape, dtype: dtype, like: x)
        let (xs, ys) = (x.expanded(to: shape), y.expanded(to: shape))
        out.run(ElementwiseKernels.self, KernelCall(.binary(k), reads: [xs, ys], writes: [out]), "\(k)") {
            $0.binary(k, xs, ys, into: out)
        }
        guard Autograd.tracks(x, y), !k.isBitwise else { return out }
        // Each gradient is summed back over the dimensions its input was broadcast along.
        // Each rule captures only what it needs: add and sub keep no tensor alive.
        // `saved` names what a rule reads, only for the gradients that are needed.
        // The arithmetic rules compute only the gradients that are wanted (nil for the others).
        let rule: (TensorImpl) throws -> (TensorImpl?, TensorImpl?)
        let saved: [TensorImpl?]
        let wantsX = x.requiresGrad, wantsY = y.requiresGrad
        switch k {
        case .add: (rule, saved) = ({ g in (g, g) }, [])
        case .sub: (rule, saved) = ({ g in (g, wantsY ? try unary(.neg, g) : nil) }, [])
        case .mul:
            rule = { g in (wantsX ? try binary(.mul, g, y) : nil, wantsY ? try binary(.mul, g, x) : nil) }
            saved = [wantsX ? y : nil, wantsY ? x : nil]
        case .div:  // d(x/y)/dy = -(x/y)/y
            rule = { g in
                (
                    wantsX ? try binary(.div, g, y) : nil,
                    wantsY ? try unary(.neg, try binary(.div, try binary(.div, try binary(.mul, g, x), y), y)) : nil
                )
            }
            saved = [y, wantsY ? x : nil]
        case .pow:  // d(x**y)/dx = y·x**(y-1)
            rule = { g in
                let ym1 = try binary(.sub, y, scalar: ScalarOperand(int: 1), scalarFirst: false)
                return (try binary(.mul, try binary(.mul, g, y), try binary(.pow, x, ym1)), try powExponentGrad(g, x, out))
            }
            saved = [x, y, y.requiresGrad ? out : nil]
        case .maximum, .minimum:
            rule = { g in
                let gx = try binary(.mul, g, try maxShare(x, y, larger: k == .maximum))
                return (gx, try binary(.sub, g, gx))
            }
            saved = [x, y]
        case .bitwiseAnd, .bitwiseOr, .bitwiseXor, .leftShift, .rightShift, .gcd, .lcm:
            return out  // integers and bools carry no gradient
        default:
            guard let math = try mathGradient(k, x, y, out) else { return out }
            rule = { g in
                let (gx, gy) = try math.0(g)
                return (gx, gy)
            }
            saved = math.1
        }
        let xShape = x.shape, yShape = y.shape
        return Autograd.record(out, Autograd.name(op), [x, y], saved: saved) { g in
            let (gx, gy) = try rule(g)
            return [try gx.map { try Autograd.reduce($0, to: xShape) }, try gy.map { try Autograd.reduce($0, to: yShape) }]
        }
    }

    private static func scalarOf(_ v: Double) -> ScalarOperand { ScalarOperand(float: v) }

    /// The gradient rules of the binary math ops (nil: the op has none, as in PyTorch), with
    /// what each reads. Written with the engine's ops, so that they are differentiable too.
    private static func mathGradient(_ k: BinaryKernel, _ x: TensorImpl, _ y: TensorImpl, _ out: TensorImpl) throws
        -> ((TensorImpl) throws -> (TensorImpl, TensorImpl), [TensorImpl?])?
    {
        func mul(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try binary(.mul, a, b) }
        func div(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try binary(.div, a, b) }
        func zeros(_ g: TensorImpl) throws -> TensorImpl { try binary(.mul, g, scalar: scalarOf(0), scalarFirst: false) }
        switch k {
        case .atan2:  // d atan2(x, y) = (y dx - x dy) / (x² + y²)
            return (
                { g in
                    let r = try binary(.add, try mul(x, x), try mul(y, y))
                    let gr = try div(g, r)
                    return (try mul(gr, y), try unary(.neg, try mul(gr, x)))
                }, [x, y]
            )
        case .hypot:
            return ({ g in (try mul(g, try div(x, out)), try mul(g, try div(y, out))) }, [x, y, out])
        case .copysign:  // out / x where x ≠ 0, else 0; no gradient for the sign's source
            return (
                { g in
                    let ratio = try div(out, x)
                    let zero = try Comparison.compare(.eq, x, scalar: scalarOf(0))
                    return (try mul(g, try Comparison.where(zero, scalar: scalarOf(0), ratio)), try zeros(g))
                }, [x, out]
            )
        case .xlogy, .xlog1py:  // d/dx = xlogy(x ≠ 0, y); d/dy = x / y (x / (1 + y))
            return (
                { g in
                    let nonzero = try Ops.cast(try Comparison.compare(.ne, x, scalar: scalarOf(0)), to: x.dtype)
                    let gx = try mul(g, try binary(k, nonzero, y))
                    let base = k == .xlogy ? y : try binary(.add, y, scalar: scalarOf(1), scalarFirst: false)
                    return (gx, try mul(g, try div(x, base)))
                }, [x, y]
            )
        case .logaddexp, .logaddexp2:  // d/dx = 1 / (1 + b^(y - x)) = b^(x - out)
            return (
                { g in
                    let gx: TensorImpl, gy: TensorImpl
                    if k == .logaddexp {
                        gx = try unary(.exp, try binary(.sub, x, out))
                        gy = try unary(.exp, try binary(.sub, y, out))
                    } else {
                        gx = try unary(.exp2, try binary(.sub, x, out))
                        gy = try unary(.exp2, try binary(.sub, y, out))
                    }
                    return (try mul(g, gx), try mul(g, gy))
                }, [x, y, out]
            )
        case .fmod, .remainder:  // d/dx = 1; d/dy = -trunc(x / y) (fmod), -floor(x / y) (remainder)
            return (
                { g in
                    let q = try unary(k == .fmod ? .trunc : .floor, try div(x, y))
                    return (g, try unary(.neg, try mul(g, q)))
                }, [x, y]
            )
        case .fmax, .fmin:  // to x where it is chosen (y NaN, or x ≥ y for fmax), else to y
            return (
                { g in
                    let wins = try Comparison.compare(k == .fmax ? .ge : .le, x, y)
                    let takesX = try binary(.bitwiseOr, wins, try Comparison.compare(.ne, y, y))
                    let gx = try Comparison.where(takesX, g, try zeros(g))
                    return (gx, try binary(.sub, g, gx))
                }, [x, y]
            )
        case .floorDivide, .truncDivide:
            return ({ g in (try zeros(g), try zeros(g)) }, [])
        case .nextafter:  // as PyTorch: the gradient passes to x
            return ({ g in (g, try zeros(g)) }, [])
        case .igamma, .igammac:  // d/dx = ± x^(a-1) e^-x / Γ(a); none for a
            return (
                { g in
                    let logDensity = try binary(
                        .sub,
                        try binary(
                            .sub,
                            try mul(try binary(.sub, x, scalar: scalarOf(1), scalarFirst: false), try unary(.log, y)), y),
                        try unary(.lgamma, x))
                    var gy = try mul(g, try unary(.exp, logDensity))
                    if k == .igammac { gy = try unary(.neg, gy) }
                    return (try zeros(g), gy)
                }, [x, y]
            )
        case .zeta:  // d/dq ζ(s, q) = -s ζ(s + 1, q); none for s
            return (
                { g in
                    let next = try binary(.zeta, try binary(.add, x, scalar: scalarOf(1), scalarFirst: false), y)
                    return (try zeros(g), try unary(.neg, try mul(g, try mul(x, next))))
                }, [x, y]
            )
        default:
            return nil
        }
    }

    package static func binary(_ k: BinaryKernel, _ a: TensorImpl, scalar: ScalarOperand, scalarFirst: Bool) throws -> TensorImpl {
        let op = info(k)
        if k.rawValue > BinaryKernel.bitwiseXor.rawValue {
            // The math ops take the scalar as a 0-d tensor of its kind, which promotes alike.
            let s = try Ops.scalarTensor(scalar, dtype: scalar.dtype, device: a.device)
            return try scalarFirst ? binary(k, s, a) : binary(k, a, s)
        }
        return try op.run(a) { try binary(k, op, $0, scalar: scalar, scalarFirst: scalarFirst) }
    }

    private static func binary(
        _ k: BinaryKernel, _ op: OpInfo, _ x0: TensorImpl, scalar: ScalarOperand,
        scalarFirst: Bool
    ) throws -> TensorImpl {
        let dtype = computeType(k, resultType(x0, scalar))
        try checkBool(k, dtype)
        if k == .pow, !scalarFirst, !dtype.isFloatingPoint, scalar.value.int < 0 {
            throw LucidError.runtime("pow: integers to negative integer powers are not allowed")
        }
        let x = try Ops.cast(x0, to: dtype)
        let out = try TensorImpl.empty(x.shape, dtype: dtype, like: x)
        out.run(ElementwiseKernels.self, KernelCall(.binaryScalar(k), reads: [x], writes: [out]), "\(k)") {
            $0.binary(k, x, scalar: scalar.value, scalarFirst: scalarFirst, into: out)
        }
        guard Autograd.tracks(x), !k.isBitwise else { return out }
        let rule: (TensorImpl) throws -> TensorImpl
        var saved: [TensorImpl] = []
        switch (k, scalarFirst) {
        case (.add, _), (.sub, false): rule = { g in g }
        case (.sub, true): rule = { g in try unary(.neg, g) }
        case (.mul, _), (.div, false): rule = { g in try binary(k, g, scalar: scalar, scalarFirst: false) }
        case (.div, true):  // d(s/x)/dx = -(s/x)/x
            rule = { g in try unary(.neg, try binary(.div, try binary(.mul, g, out), x)) }
            saved = [out, x]
        case (.pow, true):  // d(s**x)/dx = s**x · log s
            let logS = ScalarOperand(float: Double.log(scalar.value.double))
            rule = { g in try binary(.mul, try binary(.mul, g, out), scalar: logS, scalarFirst: false) }
            saved = [out]
        case (.pow, false):  // d(x**s)/dx = s·x**(s-1)
            let lowered = ScalarOperand(float: scalar.value.double - 1)
            rule = { g in
                try binary(
                    .mul, try binary(.mul, g, try binary(.pow, x, scalar: lowered, scalarFirst: false)), scalar: scalar,
                    scalarFirst: false)
            }
            saved = [x]
        case (.maximum, _), (.minimum, _):
            rule = { g in
                let s = try Ops.scalarTensor(scalar, dtype: x.dtype, device: x.device)
                return try binary(.mul, g, try maxShare(x, s, larger: k == .maximum))
            }
            saved = [x]
        default: return out
        }
        return Autograd.record(out, Autograd.name(op), [x], saved: saved) { g in [try rule(g)] }
    }

    /// Unary ops by kernel. exp, expm1, log, log1p, log2, log10, rsqrt, softplus, tan, asin,
    /// acos, sinh, cosh and erfinv are on PyTorch's float32 autocast list; the rest keep their
    /// input dtype.
    static let unaryInfos: [OpInfo] = UnaryKernel.allCases.filter { $0 != .geluTanh }.map { k in
        switch k {
        case .neg: return neg
        case .relu: return relu
        case .exp, .expm1, .log, .log1p, .log2, .log10, .rsqrt, .softplus, .tan, .asin, .acos, .sinh, .cosh, .erfinv:
            return OpInfo(k.name, .float32)
        default: return OpInfo(k.name, .none)
        }
    }

    static func info(_ k: UnaryKernel) -> OpInfo {
        let name = k == .geluTanh ? "gelu" : k.name
        return unaryInfos.first { $0.name == name } ?? neg
    }

    /// `~a`: logical not for bool, two's-complement not for integers (`-a - 1`, wrapping).
    package static func bitwiseNot(_ a: TensorImpl) throws -> TensorImpl {
        guard !a.dtype.isFloatingPoint else {
            throw LucidError.type("bitwise_not: only integer and bool tensors are supported, got \(a.dtype)")
        }
        return try bitwiseNot.run(a) { a in
            if a.dtype == .bool { return try Comparison.compare(.eq, a, scalar: ScalarOperand(bool: false)) }
            return try binary(.sub, try unary(.neg, a), scalar: ScalarOperand(int: 1), scalarFirst: false)
        }
    }

    package static func unary(_ k: UnaryKernel, _ a: TensorImpl) throws -> TensorImpl {
        let op = info(k)
        if a.dtype == .bool && k.keepsIntegers {
            throw LucidError.type("\(op.name): not supported for bool tensors" + (k == .neg ? "; use logical_not (or ~) instead" : ""))
        }
        return try op.run(a) { try unary(k, op, $0) }
    }

    private static func unary(_ k: UnaryKernel, _ op: OpInfo, _ x0: TensorImpl) throws -> TensorImpl {
        var x = x0
        if !k.keepsIntegers && !x.dtype.isFloatingPoint { x = try Ops.cast(x, to: .float32) }
        let out = try TensorImpl.empty(x.shape, dtype: x.dtype, like: x)
        out.run(ElementwiseKernels.self, KernelCall(.unary(k), reads: [x], writes: [out]), k.name) { $0.unary(k, x, into: out) }
        guard Autograd.tracks(x), k.hasDerivative else { return out }
        // The node keeps one tensor: the output when the derivative reads it, else the input
        // (the kernel then ignores the other argument).
        let saved = k.derivativeUsesOutput ? out : x
        return Autograd.record(out, Autograd.name(op), [x], saved: [saved]) { g in
            let gx = try TensorImpl.empty(saved.shape, dtype: saved.dtype, on: saved.backend)
            saved.run(
                ElementwiseKernels.self, KernelCall(.unaryBackward(k), reads: [saved, saved, g], writes: [gx]),
                "\(k.name)_backward"
            ) { $0.unaryBackward(k, x: saved, y: saved, grad: g, into: gx) }
            return [gx]
        }
    }
}

/// A Python-style scalar operand: its value and the dtype its kind stands for.
package struct ScalarOperand: Sendable {
    package enum Kind: Int32, Sendable, CaseIterable { case float = 0, int = 1, bool = 2 }
    let kind: Kind
    let value: Scalar

    package init(float v: Double) { kind = .float; value = Scalar(v) }
    package init(int v: Int64) { kind = .int; value = Scalar(int: v) }
    package init(bool v: Bool) { kind = .bool; value = Scalar(int: v ? 1 : 0) }

    var dtype: DType {
        switch kind {
        case .float: return .float32
        case .int: return .int64
        case .bool: return .bool
        }
    }
}

/// What every device's compute stream provides: memory, transfers, a synchronise point, fills
/// and copies, and an answer, per kernel call, to where that call runs. A backend implements
/// kernels only; dtypes, broadcasting, AMP casts and errors are decided by the op layer before
/// a kernel is called.
///
/// Work may be queued lazily: kernels only need to have run by the time `synchronize()` or
/// `read(_:into:)` returns. A Metal backend encodes kernels into command buffers and commits
/// them at the synchronise point; the host backends run each kernel at once.
///
/// Kernels come in families (`KernelFamily`), each a protocol of its own (`ElementwiseKernels`,
/// ...) that a backend conforms to when it has them. Before each kernel call the op layer asks
/// the backend once, with the op and its operands, how the call is to run (`route(_:)`):
///
/// - `.native`: on the backend's own kernels (a backend without the family's protocol is
///   treated as answering what the op does when declined, `KernelOp.whenDeclined`);
/// - `.host`: on the host kernels, after the backend's queued work has finished, counted in
///   `HostKernelFallbacks`;
/// - `.compose`: the op layer builds the op from other kernels (the fused and direct kernels,
///   which are optimisations: softmax, attention, direct convolution passes, the
///   normalisations, average pooling, leaky ReLU, add-scaled).
///
/// The route is the only way a backend declines: a kernel it is called for runs (an error in
/// it is thrown, never a silent decline). Optional kernels come in protocols of their own
/// (`FusedElementwiseKernels`, ...), so a backend without them has nothing to implement and
/// a call for them is composed.
///
/// So a new backend needs its core (this protocol and its `DeviceBuffer`) to run every op;
/// each family it then provides moves that family's ops onto it.
protocol Backend: AnyObject, Sendable {
    var device: Device { get }
    /// A short name for messages ("cpu", "host fallback", "metal").
    var name: String { get }

    func allocate(byteCount: Int) throws -> any DeviceBuffer
    /// Waits for every queued kernel to finish.
    func synchronize()
    /// Copies host bytes into a contiguous tensor of this backend.
    func write(_ bytes: UnsafeRawBufferPointer, into dst: TensorImpl)
    /// Copies a contiguous tensor of this backend out to host memory (synchronising first).
    func read(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer)
    /// An error a kernel found on the device in work that has completed (an index out of
    /// range), taken once, for the program's next synchronisation to raise; nil for backends
    /// that report at the op.
    func takeDeferredError() -> LucidError?

    func fill(_ out: TensorImpl, with value: Scalar)
    /// Strided copy with dtype conversion (`src` and `dst` have one shape).
    func copy(_ src: TensorImpl, into dst: TensorImpl)

    /// How this backend runs `call`. Asked once per kernel call, before it is made; the
    /// default runs every call of a family the backend conforms to on its own kernels.
    func route(_ call: KernelCall) -> KernelRoute
}

extension Backend {
    func takeDeferredError() -> LucidError? { nil }

    func route(_ call: KernelCall) -> KernelRoute { .native }

    /// `read`, then the deferred error it brought to light, if any.
    func readChecked(_ src: TensorImpl, into bytes: UnsafeMutableRawBufferPointer) throws {
        read(src, into: bytes)
        if let error = takeDeferredError() { throw error }
    }
}

/// Elementwise binary kernels. The op layer has already chosen the dtype: `a`, `b` and the
/// output share it, and `a`/`b` are broadcast views of the output's shape. Raw values are the
/// C ABI's codes (`enum lucid_binary_op`), also the Metal kernels' op codes. The bitwise ops
/// take integer and bool operands only.
package enum BinaryKernel: Int32, Sendable {
    case add = 0, sub = 1, mul = 2, div = 3, pow = 4, maximum = 5, minimum = 6
    case bitwiseAnd = 7, bitwiseOr = 8, bitwiseXor = 9
    case atan2 = 10, copysign = 11, xlogy = 12, xlog1py = 13, zeta = 14
    case hypot = 15, nextafter = 16, logaddexp = 17, logaddexp2 = 18, igamma = 19, igammac = 20
    case fmod = 21, remainder = 22, floorDivide = 23, truncDivide = 24, fmax = 25, fmin = 26, heaviside = 27
    case leftShift = 28, rightShift = 29, gcd = 30, lcm = 31
    case chebyshevPolynomialT = 32, chebyshevPolynomialU = 33, chebyshevPolynomialV = 34, chebyshevPolynomialW = 35
    case shiftedChebyshevPolynomialT = 36, shiftedChebyshevPolynomialU = 37, shiftedChebyshevPolynomialV = 38, shiftedChebyshevPolynomialW = 39
    case hermitePolynomialH = 40, hermitePolynomialHe = 41, laguerrePolynomialL = 42, legendrePolynomialP = 43

    var isBitwise: Bool { self == .bitwiseAnd || self == .bitwiseOr || self == .bitwiseXor }

    /// Whether the Metal kernels have the op (the others, computed in double precision, run on
    /// the host kernels there).
    var hasMetalKernel: Bool {
        switch self {
        case .add, .sub, .mul, .div, .pow, .maximum, .minimum, .bitwiseAnd, .bitwiseOr, .bitwiseXor, .atan2, .copysign,
             .fmod, .remainder, .floorDivide, .truncDivide, .fmax, .fmin, .heaviside, .leftShift, .rightShift, .gcd, .lcm:
            return true
        default: return false
        }
    }

    /// Ops whose integer operands promote to float32, as division's do.
    var promotesIntegers: Bool {
        (BinaryKernel.atan2.rawValue...BinaryKernel.zeta.rawValue).contains(rawValue) || isPolynomial
    }

    /// The orthogonal polynomials p_n(x), x first and n second.
    var isPolynomial: Bool { rawValue >= BinaryKernel.chebyshevPolynomialT.rawValue }

    /// Ops defined for floating operands only.
    var floatingOnly: Bool { (BinaryKernel.hypot.rawValue...BinaryKernel.igammac.rawValue).contains(rawValue) }

    /// Ops defined for integer operands only (bool refused).
    var integerOnly: Bool { (BinaryKernel.leftShift.rawValue...BinaryKernel.lcm.rawValue).contains(rawValue) }

    /// The integer divisions, whose divisor must not be 0.
    var divides: Bool { self == .fmod || self == .remainder || self == .floorDivide || self == .truncDivide }
}

/// Elementwise comparisons: operands share a dtype, the output is bool.
package enum CompareKernel: Int32, Sendable, CaseIterable {
    case eq = 0, ne, lt, le, gt, ge

    /// The op's name, without the cost of reflecting the case ("\(k)").
    var name: String {
        switch self {
        case .eq: "eq"
        case .ne: "ne"
        case .lt: "lt"
        case .le: "le"
        case .gt: "gt"
        case .ge: "ge"
        }
    }
}

/// Where one kernel call runs (see `Backend`).
enum KernelRoute: Sendable, Equatable {
    case native, host, compose
}

/// One kernel call as its backend is asked about it: the op and its operands, the tensors the
/// kernel reads and the ones it writes, in the order each op's case documents (optional
/// operands last, when given).
struct KernelCall {
    let op: KernelOp
    let reads: [TensorImpl]
    let writes: [TensorImpl]

    init(_ op: KernelOp, reads: [TensorImpl], writes: [TensorImpl]) {
        self.op = op
        self.reads = reads
        self.writes = writes
    }
}

/// The kernel calls a backend answers for, one case per kernel of the family protocols, with
/// the parameters a route may depend on. The operands (`KernelCall.reads` / `writes`) are
/// listed in each case's comment.
enum KernelOp: Sendable {
    /// reads [a, b], writes [out]
    case binary(BinaryKernel)
    /// reads [a], writes [out]
    case binaryScalar(BinaryKernel)
    /// reads [a], writes [out]
    case unary(UnaryKernel)
    /// reads [x, y, grad], writes [gradIn]
    case unaryBackward(UnaryKernel)
    /// reads [a, b], writes [out]
    case compare(CompareKernel)
    /// reads [cond, a, b], writes [out]
    case select
    /// reads [a, b], writes [out]
    case addScaled
    /// reads [x], writes [out]
    case leakyRelu
    /// reads [x, grad], writes [gradIn]
    case leakyReluBackward
    /// reads [xw, hw, c], writes [h, cNew, activations]
    case lstmCell
    /// reads [activations, c, gradH?, gradHRecurrent?, gradC?], writes [gradGates, gradC]
    case lstmCellBackward
    /// reads [a], writes [out]
    case reduce(ReduceKernel, axes: [Int])
    /// reads [a], writes [indices, values?]
    case argReduce(axis: Int)
    /// reads [a, b, bias?], writes [out]
    case gemm
    /// reads [x], writes [cols]
    case im2col
    /// reads [cols], writes [x]
    case col2im
    /// reads the pass's inputs (forward: [x, weight, bias?]), writes [out]
    case convolution(ConvolutionPassKind, ConvolutionProblem)
    /// reads [x], writes [values, indices]
    case maxPool2d
    /// reads [grad, indices], writes [gradIn]
    case maxPool2dBackward
    /// reads [x, divisors], writes [out]
    case avgPool2d(WindowGeometry)
    /// reads [grad, divisors], writes [gradIn]
    case avgPool2dBackward(WindowGeometry)
    /// reads [x], writes [out]
    case softmax(axis: Int, log: Bool)
    /// reads [grad, y], writes [gradIn]
    case softmaxBackward(axis: Int)
    /// reads [x, weight?, bias?], writes [out, mean, rstd]
    case normalizeRows
    /// reads [grad, x, mean, rstd, weight?], writes [dx, dweight?, dbias?]
    case normalizeRowsBackward(rows: Int)
    /// reads [x, weight?, bias?], writes [out, mean, variance]
    case normalizeChannels(batch: Int, channels: Int)
    /// reads [grad, x, mean, variance, weight?], writes [dx, dweight?, dbias?]
    case normalizeChannelsBackward(batch: Int, channels: Int)
    /// reads [y, weight?, bias?], writes [out]
    case scaleChannels(batch: Int, channels: Int)
    /// reads [grad, y, weight?], writes [dy?, dweight?, dbias?]
    case scaleChannelsBackward(batch: Int, channels: Int)
    /// reads [q, k, v], writes [out, weights?]
    case attention
    /// reads [a, index], writes [out]
    case gather(dim: Int)
    /// reads [src, index], writes [out]
    case scatterAdd(dim: Int)
    /// reads [mask]
    case nonzero
    /// reads [values], writes [dst]
    case put
    /// reads [src], writes [out]
    case take
    /// reads and writes the parameter's tensors (all of one shape)
    case sgdStep, adamStep
    /// reads grads, [invScale], writes outs (one per grad), [found]
    case unscale(count: Int)
    /// reads and writes [scale, growthTracker, found]
    case updateScale
    /// reads [x, acc], writes [acc]
    case castStatistics
    /// reads the LAPACK routine's inputs, writes its outputs (`LinalgKernels`)
    case lapack

    var family: KernelFamily {
        switch self {
        case .binary, .binaryScalar, .unary, .unaryBackward, .compare, .select, .addScaled, .leakyRelu,
             .leakyReluBackward, .lstmCell, .lstmCellBackward:
            .elementwise
        case .reduce, .argReduce: .reduction
        case .gemm: .matmul
        case .im2col, .col2im, .convolution: .convolution
        case .maxPool2d, .maxPool2dBackward, .avgPool2d, .avgPool2dBackward: .pooling
        case .softmax, .softmaxBackward: .softmax
        case .normalizeRows, .normalizeRowsBackward, .normalizeChannels, .normalizeChannelsBackward, .scaleChannels,
             .scaleChannelsBackward:
            .normalization
        case .attention: .attention
        case .gather, .scatterAdd, .nonzero, .put, .take: .indexing
        case .sgdStep, .adamStep: .optimizers
        case .unscale, .updateScale, .castStatistics: .amp
        case .lapack: .linalg
        }
    }

    /// Whether the op layer can compose the call from other kernels (the fused and direct
    /// kernels, which are optimisations) and the host's kernel for it computes in float32 (the
    /// LSTM cell's, generic over the real type, is not among them).
    var isOptimisation: Bool {
        switch self {
        case .addScaled, .leakyRelu, .leakyReluBackward, .convolution, .avgPool2d, .avgPool2dBackward, .softmax,
             .softmaxBackward, .normalizeRows, .normalizeRowsBackward, .normalizeChannels, .normalizeChannelsBackward,
             .scaleChannels, .scaleChannelsBackward, .attention:
            true
        default:
            false
        }
    }

    /// How the call runs on a backend that declines its family: composed where the op has a
    /// composition (the optimisations), on the host kernels otherwise.
    var whenDeclined: KernelRoute {
        switch self {
        case .convolution, .softmax, .softmaxBackward, .attention, .normalizeRows, .normalizeRowsBackward,
             .normalizeChannels, .normalizeChannelsBackward, .scaleChannels, .scaleChannelsBackward, .lstmCell,
             .lstmCellBackward:
            .compose
        default:
            .host
        }
    }
}

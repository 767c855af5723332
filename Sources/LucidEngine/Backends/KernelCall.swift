/// Where one kernel call runs (see `Backend`).
enum KernelRoute: Sendable, Equatable {
    case native, host, compose
}

/// One kernel call as its backend is asked about it: the op and its operands, the tensors the
/// kernel reads and the ones it writes, in the order each op's case documents (optional
/// operands last, when given).
struct KernelCall {
    let op: KernelOp
    let reads: Operands
    let writes: Operands

    init(_ op: KernelOp, reads: Operands, writes: Operands) {
        self.op = op
        self.reads = reads
        self.writes = writes
    }
}

/// A kernel call's reads or its writes. The first three are held inline, so that the calls of
/// the core kernels (at most three of each) allocate nothing for their operands: a small op
/// makes one call, and two arrays were a tenth of its time.
struct Operands: RandomAccessCollection, ExpressibleByArrayLiteral {
    private let first: TensorImpl?, second: TensorImpl?, third: TensorImpl?
    /// The operands after the third.
    private let more: [TensorImpl]
    let count: Int

    @inline(__always)
    init(_ operands: [TensorImpl]) {
        count = operands.count
        first = count > 0 ? operands[0] : nil
        second = count > 1 ? operands[1] : nil
        third = count > 2 ? operands[2] : nil
        more = count > 3 ? Array(operands[3...]) : []
    }

    @inline(__always)
    init(arrayLiteral operands: TensorImpl...) { self.init(operands) }

    var startIndex: Int { 0 }
    var endIndex: Int { count }

    subscript(i: Int) -> TensorImpl {
        precondition(i >= 0 && i < count, "operand \(i) of \(count)")
        switch i {
        case 0: return first!
        case 1: return second!
        case 2: return third!
        default: return more[i - 3]
        }
    }

    /// The operands followed by `others`.
    static func + <S: Sequence<TensorImpl>>(operands: Operands, others: S) -> [TensorImpl] {
        Array(operands) + others
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
    /// reads [xw, wHh, h0, c0, bHh?], writes [out, cells, activations]: a whole layer's steps
    case lstmRecurrence
    /// reads [grad, wHh, c0, cells, activations], writes [gradGates, gradH0, gradC0]: its backward
    case lstmRecurrenceBackward
    /// reads [xw, hw], writes [h]
    case rnnCell(relu: Bool)
    /// reads [h, gradH, gradHRecurrent?], writes [gradPre]
    case rnnCellBackward(relu: Bool)
    /// reads [xw, hw, h], writes [hNew, activations]
    case gruCell
    /// reads [activations, h, gradH, gradHRecurrent?, gradHCarry?], writes [gradXW, gradHW, gradHDirect]
    case gruCellBackward
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
    indirect case convolution(ConvolutionPassKind, ConvolutionProblem)
    /// reads [x], writes [values, indices]
    case maxPool2d
    /// reads [grad, indices], writes [gradIn]
    case maxPool2dBackward
    /// reads [x, divisors], writes [out]
    indirect case avgPool2d(WindowGeometry)
    /// reads [grad, divisors], writes [gradIn]
    indirect case avgPool2dBackward(WindowGeometry)
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
    /// reads [q, k, v], writes [out, weights?]
    case attention
    /// reads [a, index], writes [out]
    case gather(dim: Int)
    /// reads [src, index], writes [out]
    case scatterAdd(dim: Int)
    /// reads [logp, target] + [weight], writes [loss, weights]
    case nllTerms(ignoreIndex: Int64)
    /// reads [grad, target, weights] + [total], writes [gradIn]
    case nllBackward(ignoreIndex: Int64)
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
            .leakyReluBackward, .lstmCell, .lstmCellBackward, .lstmRecurrence, .lstmRecurrenceBackward, .rnnCell, .rnnCellBackward,
            .gruCell, .gruCellBackward:
            .elementwise
        case .reduce, .argReduce: .reduction
        case .gemm: .matmul
        case .im2col, .col2im, .convolution: .convolution
        case .maxPool2d, .maxPool2dBackward, .avgPool2d, .avgPool2dBackward: .pooling
        case .softmax, .softmaxBackward: .softmax
        case .normalizeRows, .normalizeRowsBackward, .normalizeChannels, .normalizeChannelsBackward:
            .normalization
        case .attention: .attention
        case .gather, .scatterAdd, .nllTerms, .nllBackward, .nonzero, .put, .take: .indexing
        case .sgdStep, .adamStep: .optimizers
        case .unscale, .updateScale, .castStatistics: .amp
        case .lapack: .linalg
        }
    }

    /// Whether the op layer can compose the call from other kernels (the fused and direct
    /// kernels, which are optimisations) and the host's kernel for it computes in float32 (the
    /// recurrent cells', generic over the real type, are not among them).
    var isOptimisation: Bool {
        switch self {
        case .addScaled, .leakyRelu, .leakyReluBackward, .convolution, .avgPool2d, .avgPool2dBackward, .softmax,
            .softmaxBackward, .normalizeRows, .normalizeRowsBackward, .normalizeChannels, .normalizeChannelsBackward,
            .attention, .nllTerms, .nllBackward, .lstmRecurrence, .lstmRecurrenceBackward:
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
            .normalizeChannels, .normalizeChannelsBackward, .lstmCell,
            .lstmCellBackward, .lstmRecurrence, .lstmRecurrenceBackward, .rnnCell, .rnnCellBackward, .gruCell, .gruCellBackward,
            .nllTerms, .nllBackward:
            .compose
        default:
            .host
        }
    }
}

/// The families a backend's kernels come in, named as the files that hold them in each
/// backend's folder (`Host+Elementwise.swift`, `Metal+Elementwise.swift`, ...). A backend
/// provides the families it has and declines the others; see `Backend`.
package enum KernelFamily: String, CaseIterable, Sendable {
    case elementwise, reduction, matmul, convolution, pooling, softmax, normalization, attention, indexing, optimizers,
        amp, linalg
}

/// Elementwise arithmetic, unary functions and their derivatives, comparisons and selection.
protocol ElementwiseKernels: AnyObject, Sendable {
    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl)
    /// `a op s` (or `s op a` when `scalarFirst`).
    func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Scalar, scalarFirst: Bool, into out: TensorImpl)
    func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl)
    /// `gradIn = grad * d op(x)/dx`, given the forward input `x` and output `y` (all of one
    /// shape and floating dtype).
    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl)
    /// `out = a op b` as bool; `a`, `b` share a dtype and are broadcast views of out's shape.
    func compare(_ op: CompareKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl)
    /// `out = cond ? a : b`; `cond` is bool, `a`/`b` share out's dtype, all broadcast views.
    func select(_ cond: TensorImpl, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl)
}

/// Fused elementwise kernels (family `elementwise`), for the calls the backend routes to them;
/// the op layer composes the others.
protocol FusedElementwiseKernels: AnyObject, Sendable {
    /// `out = a + alpha·b` in one pass, for `a`, `b` and `out` of one shape and dtype (`out`
    /// may be `a`).
    func addScaled(_ a: TensorImpl, _ b: TensorImpl, alpha: Float, into out: TensorImpl)
    /// Leaky ReLU, `out = x > 0 ? x : slope·x`, for `x` and `out` of one shape.
    func leakyRelu(_ x: TensorImpl, slope: Float, into out: TensorImpl)
    /// Its backward, `gradIn = x > 0 ? grad : slope·grad`, all of one shape.
    func leakyReluBackward(_ x: TensorImpl, grad: TensorImpl, slope: Float, into gradIn: TensorImpl)
}

/// The fused Elman, LSTM and GRU cells (family `elementwise`), for the calls the backend routes
/// to them; the op layer composes the others from elementwise ops.
protocol RecurrentCellKernels: AnyObject, Sendable {
    /// One LSTM step over contiguous tensors of one floating dtype: with the gates' inputs
    /// `xw + hw` ([B, 4H], PyTorch's order: input, forget, cell, output) and the cell state `c`
    /// ([B, H]), `cNew = σ(f)·c + σ(i)·tanh(g)` and `h = σ(o)·tanh(cNew)` ([B, H]), computed in
    /// the dtype's real type and rounded once each (h from cNew as stored); `activations`
    /// ([B, 5H], float32, or float64 for float64) receives σ(i), σ(f), tanh(g), σ(o) and
    /// tanh(cNew) for the backward.
    func lstmCell(
        _ xw: TensorImpl, _ hw: TensorImpl, _ c: TensorImpl, h: TensorImpl, cNew: TensorImpl,
        activations: TensorImpl)
    /// Its backward from the gradient of `h` (plus `gradHRecurrent` when given, summed in the
    /// real type), of `cNew`, or both (contiguous, of c's dtype): the gradient of the gates'
    /// inputs ([B, 4H]) and of `c`.
    func lstmCellBackward(
        activations: TensorImpl, c: TensorImpl, gradH: TensorImpl?, gradHRecurrent: TensorImpl?,
        gradC: TensorImpl?, gradGates: TensorImpl, gradCPrevious: TensorImpl)
    /// A whole LSTM layer's steps in `order`, contiguous, float32 or bfloat16 (the activations
    /// float32): each step's `hw = h·wHhᵀ (+ bHh)` from the step before (h0, c0 first), summed
    /// in float32 and rounded once to the dtype, then `lstmCell` with that step's row of `xw`
    /// ([T, B, 4H]) into its rows of `out` (h, [T + 1, B, H]; the last row is left to the
    /// caller), `cells` (cNew) and `activations`. The steps of one batch row depend on no other
    /// row, so a backend may run parts of the batch through every step apart.
    func lstmRecurrence(
        _ xw: TensorImpl, wHh: TensorImpl, bHh: TensorImpl?, h0: TensorImpl, c0: TensorImpl, order: [Int],
        out: TensorImpl, cells: TensorImpl, activations: TensorImpl)
    /// The backward of `lstmRecurrence` through its steps in reverse `order`, of its dtypes
    /// and layout: from `grad` ([T + 1, B, H]: each step's h gradient, then the last c's), the
    /// cell state before each step (`c0`, then `cells`' rows) and the activations, each step's
    /// gates' gradient into `gradGates` ([T, B, 4H]), whose recurrent part `gradGates·wHh`
    /// (summed in float32, rounded once to the dtype) joins the step before's h gradient;
    /// h0's and c0's gradients into `gradH0` and `gradC0` ([B, H]).
    func lstmRecurrenceBackward(
        _ grad: TensorImpl, wHh: TensorImpl, c0: TensorImpl, cells: TensorImpl, activations: TensorImpl, order: [Int],
        gradGates: TensorImpl, gradH0: TensorImpl, gradC0: TensorImpl)
    /// One Elman step over contiguous tensors of one floating dtype: `h = act(xw + hw)` ([B, H]),
    /// act tanh or (`relu`) ReLU, computed in the dtype's real type and rounded once.
    func rnnCell(_ xw: TensorImpl, _ hw: TensorImpl, relu: Bool, h: TensorImpl)
    /// Its backward from the step's output `h` and its gradient (plus `gradHRecurrent` when
    /// given, summed in the real type): the gradient of `xw + hw`.
    func rnnCellBackward(h: TensorImpl, relu: Bool, gradH: TensorImpl, gradHRecurrent: TensorImpl?, gradPre: TensorImpl)
    /// One GRU step over contiguous tensors of one floating dtype, PyTorch's equations: with the
    /// input's and the hidden state's products `xw` and `hw` ([B, 3H], each with its bias;
    /// gates reset, update, new) and the state `h` ([B, H]), `r = σ(xw_r + hw_r)`,
    /// `z = σ(xw_z + hw_z)`, `n = tanh(xw_n + r·hw_n)` and `hNew = n + z·(h − n)`, computed in
    /// the dtype's real type and rounded once; `activations` ([B, 4H], float32, or float64 for
    /// float64) receives r, z, n and hw_n for the backward.
    func gruCell(_ xw: TensorImpl, _ hw: TensorImpl, _ h: TensorImpl, hNew: TensorImpl, activations: TensorImpl)
    /// Its backward from the gradient of `hNew` (plus `gradHRecurrent` and `gradHCarry` when
    /// given, summed in the real type; contiguous, of h's dtype) and the state `h` the step
    /// started from: the gradients of `xw` and `hw` ([B, 3H]) and h's direct part `z·grad`.
    func gruCellBackward(
        activations: TensorImpl, h: TensorImpl, gradH: TensorImpl, gradHRecurrent: TensorImpl?, gradHCarry: TensorImpl?,
        gradXW: TensorImpl, gradHW: TensorImpl, gradHDirect: TensorImpl)
}

/// Reductions over axes, and the arg-reductions.
protocol ReductionKernels: AnyObject, Sendable {
    /// Reduces `a` over `axes` into `out`, which has `a`'s rank with those axes set to 1.
    /// Floating-point input accumulates in at least float32.
    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl)
    /// The max (or min) of `a` along `axis` and its first index (NaN counts as the largest and
    /// smallest). `values` (optional, a's dtype) and `indices` (int64) have a's shape without
    /// `axis`; `a.shape[axis]` is non-zero.
    func argReduce(max: Bool, _ a: TensorImpl, axis: Int, values: TensorImpl?, indices: TensorImpl)
}

/// Matrix products.
protocol MatmulKernels: AnyObject, Sendable {
    /// Batched `out[i] = a[i] @ b[i] (+ bias)`: `a` is [B, M, K], `b` is [B, K, N] (any
    /// strides), `bias` is [N] or nil and `out` is a contiguous [B, M, N]. All share a dtype;
    /// low-precision floats multiply in float32 and round once.
    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl)
    /// `b` ([1, K, N]) prepared for products with `rows`-row left operands into `outType`,
    /// repeated with the same values (a recurrent layer's steps), or nil where the kernels
    /// multiply it as fast as it is (the default).
    func prepare(_ b: TensorImpl, rows: Int, bias: Bool, outType: DType) -> AnyObject?
    /// `gemm` with a right operand `prepare` made; false (nothing written) when the prepared
    /// form does not fit the call, which `gemm` then takes with the operand itself.
    func gemm(_ a: TensorImpl, prepared: AnyObject, bias: TensorImpl?, into out: TensorImpl) -> Bool
}

extension MatmulKernels {
    func prepare(_ b: TensorImpl, rows: Int, bias: Bool, outType: DType) -> AnyObject? { nil }
    func gemm(_ a: TensorImpl, prepared: AnyObject, bias: TensorImpl?, into out: TensorImpl) -> Bool { false }
}

/// The window gathers under convolution.
protocol ConvolutionKernels: AnyObject, Sendable {
    /// Windows of `x` ([N, C, H, W], any strides, floating) into contiguous `cols`
    /// ([N, C·kh·kw, oh·ow]); positions outside the input read 0.
    func im2col(_ x: TensorImpl, _ g: WindowGeometry, into cols: TensorImpl)
    /// The adjoint of `im2col`: sums `cols` into contiguous `x` (in float32, rounding once).
    func col2im(_ cols: TensorImpl, _ g: WindowGeometry, into x: TensorImpl)
}

/// Direct convolution passes (family `convolution`), for the problems the backend routes to
/// them; the op layer composes the others from im2col and GEMM.
protocol DirectConvolutionKernels: AnyObject, Sendable {
    /// One pass: `.forward` writes `out` from x, w (and bias); `.backwardData` writes the input
    /// gradient from the output gradient and w; `.backwardWeights` writes the weight gradient
    /// from x and the output gradient. Throws when the kernel fails at run time.
    func convolution(
        _ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?, weight: TensorImpl?,
        bias: TensorImpl?, gradOut: TensorImpl?, into out: TensorImpl) throws
}

/// Max pooling and its adjoint.
protocol PoolingKernels: AnyObject, Sendable {
    /// Max pooling of the contiguous planes `x` ([P, 1, H, W], floating) into `values` (x's
    /// dtype) and `indices` (int64 flat positions within the plane), both [P, 1, oh, ow]; NaN
    /// wins a window and ties go to its first position.
    func maxPool2d(_ x: TensorImpl, _ g: WindowGeometry, values: TensorImpl, indices: TensorImpl)
    /// Its adjoint: contiguous `gradIn` ([P, 1, H, W]) holds the sum of `grad` ([P, 1, oh, ow],
    /// contiguous, gradIn's dtype) at `indices`, accumulated in float32.
    func maxPool2dBackward(_ grad: TensorImpl, indices: TensorImpl, _ g: WindowGeometry, into gradIn: TensorImpl)
}

/// Average pooling (family `pooling`), for the calls the backend routes to it; the op layer
/// composes the others.
protocol AveragePoolingKernels: AnyObject, Sendable {
    /// Average pooling of planes `x` ([P, H, W]): each window's in-bounds sum (padding adds
    /// nothing) divided by `divisors[i·ow + j]` (float32 [oh·ow]), into `out` ([P, oh, ow]).
    func avgPool2d(_ x: TensorImpl, _ g: WindowGeometry, divisors: TensorImpl, into out: TensorImpl)

    /// Its adjoint: each input position receives Σ grad / divisor over the windows holding it.
    func avgPool2dBackward(_ grad: TensorImpl, _ g: WindowGeometry, divisors: TensorImpl, into gradIn: TensorImpl)
}

/// A direct softmax, for the calls the backend routes to it; the op layer composes the others
/// from reductions and elementwise ops.
protocol SoftmaxKernels: AnyObject, Sendable {
    /// softmax (or log-softmax) of a contiguous floating tensor along `axis` into `out`
    /// (same shape and dtype), computed in float32. Throws when the kernel fails at run time.
    func softmax(_ x: TensorImpl, axis: Int, log: Bool, into out: TensorImpl) throws
}

/// The backward of a direct softmax (family `softmax`), for the calls the backend routes to it.
protocol SoftmaxBackwardKernels: AnyObject, Sendable {
    /// The backward of `softmax` from its output `y` and the gradient `grad` (contiguous, one
    /// shape and floating dtype; the host takes float32 only): softmax `y·(g - Σg·y)`,
    /// log-softmax `g - exp(y)·Σg`, the sums along `axis` in float32, into `gradIn` (the
    /// dtype, rounded once).
    func softmaxBackward(_ grad: TensorImpl, _ y: TensorImpl, axis: Int, log: Bool, into gradIn: TensorImpl)
}

/// Where the affine of a row normalisation reads its weight and bias for element k of row r
/// of a [rows, n] view: rows cycle through `groups` groups of channels (`r % groups`), and a
/// channel is a run of `span` columns, so the parameters have `groups · n / span` entries and
/// element (r, k) reads entry `(r % groups) · (n / span) + k / span`. layer_norm's affine is
/// per column (`perColumn`: one group, runs of one); group_norm's, of [N, C, S] input in rows of
/// one group of one sample, is per channel (`groups` G, `span` S).
struct RowAffine: Sendable, Equatable {
    let groups: Int
    let span: Int

    static let perColumn = RowAffine(groups: 1, span: 1)

    /// The entries of `weight` and `bias` for rows of `n` elements.
    func parameters(_ n: Int) -> Int { groups * (n / span) }

    /// The first entry row `r`'s affine reads (rows of `n` elements).
    func offset(row r: Int, _ n: Int) -> Int { (r % groups) * (n / span) }
}

/// Row normalisation, the core of layer_norm and group_norm.
protocol NormalizationKernels: AnyObject, Sendable {
    /// Normalises each row of the contiguous floating `x`, viewed as [rows, n]:
    /// `out = (x - mean) · rstd · weight + bias` with the row's mean and
    /// rstd = 1 / sqrt(biased variance + eps), computed in float32 (sums at least compensated)
    /// and rounded once into `out` (contiguous, x's dtype or float32). `weight` and `bias` are
    /// optional contiguous float32, laid out as `affine` says; `mean` and `rstd` receive the
    /// statistics (float32 [rows]).
    func normalizeRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?, affine: RowAffine,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl)

}

/// The fused normalisations beyond the rows' forward (family `normalization`), for the calls
/// the backend routes to them; the op layer composes the others.
protocol FusedNormalizationKernels: AnyObject, Sendable {
    /// The backward of `normalizeRows`, fused, for `grad` and `x` viewed as [rows, n] with
    /// their saved `mean` and `rstd`: with x̂ = (x - mean)·rstd and gy = grad·weight (the
    /// weight laid out as `affine` says), `dx = rstd·(gy - mean(gy) - x̂·mean(gy·x̂))`
    /// ([rows, n], the means along each row) and, when given, `dweight = Σ grad·x̂` and
    /// `dbias = Σ grad` over the elements that read each entry (float32, the weight's layout).
    func normalizeRowsBackward(
        _ grad: TensorImpl, _ x: TensorImpl, rows: Int, mean: TensorImpl, rstd: TensorImpl,
        weight: TensorImpl?, affine: RowAffine, dx: TensorImpl, dweight: TensorImpl?, dbias: TensorImpl?)

    /// Batch normalisation of `x` viewed as [batch, channels, S] with the batch's statistics:
    /// each channel's mean and biased variance over its batch·S values (float32 [channels]),
    /// and `out = (x - mean)·rstd·weight + bias` per channel (rstd = 1 / sqrt(variance + eps);
    /// weight and bias optional float32 [channels]).
    func normalizeChannels(
        _ x: TensorImpl, batch: Int, channels: Int, eps: Float, weight: TensorImpl?,
        bias: TensorImpl?, into out: TensorImpl, mean: TensorImpl, variance: TensorImpl)

    /// The backward of `normalizeChannels`, fused: `dx` (x's shape) and, when given,
    /// `dweight = Σ grad·x̂` and `dbias = Σ grad` per channel.
    func normalizeChannelsBackward(
        _ grad: TensorImpl, _ x: TensorImpl, batch: Int, channels: Int, eps: Float,
        mean: TensorImpl, variance: TensorImpl, weight: TensorImpl?, dx: TensorImpl,
        dweight: TensorImpl?, dbias: TensorImpl?)
}

/// Fused attention.
protocol AttentionKernels: AnyObject, Sendable {
    /// Fused scaled dot-product attention: `out = softmax(scale · q·kᵀ) · v` for q [B, L, E],
    /// k [B, S, E], v [B, S, Ev] of one floating dtype (any strides), with positions after
    /// each row's own masked out when `causal`, and those where the bool `mask` ([B, L, S], any
    /// strides; a call with one is among the reads) is false; the scores and softmax run in
    /// float32. `out` ([B, L, Ev]) and `weights` ([B, L, S], the softmax rounded to the dtype,
    /// when given) are contiguous. Throws when the kernel fails at run time (out may then hold
    /// partial results).
    func attention(
        _ q: TensorImpl, _ k: TensorImpl, _ v: TensorImpl, mask: TensorImpl?, scale: Float, causal: Bool,
        weights: TensorImpl?, into out: TensorImpl) throws
}

/// Gathers and scatters.
protocol IndexingKernels: AnyObject, Sendable {
    /// `out[i] = a[i with dimension dim replaced by index[i]]` (torch.gather); `index` is int64
    /// with out's shape, no larger than `a` in the other dimensions. An index outside
    /// `0..<a.shape[dim]` (out then holds nothing meaningful) is reported as
    /// `outOfRange(the first such index)`: thrown here, or, by a backend that checks on its
    /// device, at its next synchronisation (`takeDeferredError`).
    func gather(
        _ a: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl,
        outOfRange: @escaping @Sendable (Int64) -> LucidError) throws
    /// `out[i with dim replaced by index[i]] += src[i]`, accumulated in float32 (int64 for
    /// integers); `out` is contiguous and zeroed here first. Indices have been checked by the
    /// gather this is the adjoint of, but a backend that raises that check at its next
    /// synchronisation may get an index out of range here: it adds nothing for it (writing
    /// nothing outside `out`) and reports it the same way. Throws when memory for the
    /// accumulation cannot be had.
    func scatterAdd(_ src: TensorImpl, dim: Int, index: TensorImpl, into out: TensorImpl) throws
}

/// The negative log-likelihood's weighted gather and its adjoint (family `indexing`), for the
/// calls the backend routes to them; the op layer composes the others.
protocol ClassLossKernels: AnyObject, Sendable {
    /// For log-probabilities `logp` [N, C, M] (any strides), int64 targets `target` [N, M] and
    /// per-class weights `weight` [C] of logp's dtype (nil: all 1), with t = target[n, m]:
    /// `weights[n, m] = weight[t]` and `loss[n, m] = -logp[n, t, m]·weights[n, m]`, both 0
    /// where t is `ignoreIndex`. `loss` and `weights` are contiguous [N, M] of logp's dtype.
    /// Another target outside `0..<C` is reported as `outOfRange(it)` (then the results hold
    /// nothing meaningful).
    func nllTerms(
        _ logp: TensorImpl, target: TensorImpl, weight: TensorImpl?, ignoreIndex: Int64, loss: TensorImpl,
        weights: TensorImpl, outOfRange: @escaping @Sendable (Int64) -> LucidError) throws
    /// The gradient of those losses over `logp`: `gradIn` contiguous [N, C, M], zero but at
    /// each counted target's place, which takes `-(grad[n, m] / total)·weights[n, m]`
    /// (`-grad[n, m]·weights[n, m]` without `total`, a 0-d tensor). `grad` is [N, M] of any
    /// strides (a reduction's gradient broadcast), all of gradIn's dtype.
    func nllBackward(
        _ grad: TensorImpl, total: TensorImpl?, target: TensorImpl, weights: TensorImpl, ignoreIndex: Int64,
        into gradIn: TensorImpl)
}

/// The indexing kernels over positions the host holds: the positions of true elements, and
/// writes and reads at lists of storage offsets (family `indexing`).
protocol PlacementKernels: AnyObject, Sendable {
    /// Row-major flat positions of the true elements of a bool tensor.
    func nonzero(_ mask: TensorImpl) -> [Int]
    /// Writes `values` (contiguous, of dst's dtype, shape `[offsets.count] + shape`) into
    /// dst's storage: row j goes to the elements at storage offsets `offsets[j] + Σ i·strides`
    /// over the indices i of `shape`, rows in order, so that of two rows that meet the later
    /// one is kept.
    func put(_ values: TensorImpl, into dst: TensorImpl, at offsets: [Int], shape: [Int], strides: [Int])
    /// The reverse of `put`: `out` (contiguous, shape `[offsets.count] + shape`) gets those
    /// elements of `src`'s storage.
    func take(_ src: TensorImpl, at offsets: [Int], shape: [Int], strides: [Int], into out: TensorImpl)
}

/// The optimizers' update steps. Flags and counts live in tensors of the backend's device, so
/// that a skipped step never needs the host to read a value: `found` is a float32 element,
/// non-zero when the step is to be skipped (GradScaler's found-inf flag, `AMPKernels`); an
/// optimizer given one writes nothing when it is set.
protocol OptimizerKernels: AnyObject, Sendable {
    /// One SGD update of a parameter: contiguous tensors of one shape and floating dtype,
    /// computed in float32. `momentum`/`newMomentum` are present when momentum is non-zero.
    func sgdStep(
        param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper: SGDHyper,
        newParam: TensorImpl, newMomentum: TensorImpl?, skipIf found: TensorImpl?)
    /// One Adam (or AdamW, `decoupled`) update, likewise, at the step after `step` (a float32
    /// element counting the steps taken), which then goes up by one.
    func adamStep(
        param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, step: TensorImpl, hyper: AdamHyper,
        newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl, skipIf found: TensorImpl?)
}

/// Automatic mixed precision's kernels: GradScaler's unscale and scale update, and the
/// statistics autocast's inspection keeps. Flags, scales and counts live in tensors of the
/// backend's device, so that an infinity found, a new scale or a statistic never needs the
/// host to read a value.
protocol AMPKernels: AnyObject, Sendable {
    /// `outs[i] = grads[i] * invScale[0]` computed in float32; `found` (a float32 element) is
    /// set to 1 when any result (or input) is infinite or NaN, and left as it is otherwise.
    /// Each grad and its out are contiguous and share a floating dtype.
    func unscale(_ grads: [TensorImpl], invScale: TensorImpl, found: TensorImpl, into outs: [TensorImpl])
    /// GradScaler's update: after a skipped step (`found` set) the scale backs off and the
    /// tracker (an int32 count of clean steps) restarts; after `growthInterval` clean steps it
    /// grows, unless that leaves the float32 range.
    func updateScale(_ scale: TensorImpl, growthTracker: TensorImpl, found: TensorImpl, _ update: ScaleUpdate)
    /// Autocast inspection's statistics of `x` (contiguous, float32, float16 or bfloat16), added
    /// to the 16 words of `acc` (an int32 tensor read as unsigned words) that start at `word`:
    /// word 0 keeps the largest magnitude that is not NaN (float32 bits, raised to `x`'s if
    /// larger); words 1-2, 3-4, ... 11-12 are 64-bit counts (low word first) of the bands of
    /// `CastStatistics.Band`, in its order.
    func castStatistics(_ x: TensorImpl, into acc: TensorImpl, word: Int)
}

/// Linear algebra over LAPACK (family `linalg`). Operands are contiguous [B, m, n] batches of
/// one dtype, float32 or float64; each call returns LAPACK's `info` for each matrix (0, or
/// > 0 for the numerical failure the routine reports). Only the host has these kernels: other
/// backends route them to it.
protocol LinalgKernels: AnyObject, Sendable {
    /// LU factorization with partial pivoting of each a[b] ([m, n]): L (unit diagonal, below)
    /// and U (on and above) packed into `lu` (a's shape), the 1-based row swaps into `pivots`
    /// (int32 [B, min(m, n)]).
    func luFactor(_ a: TensorImpl, lu: TensorImpl, pivots: TensorImpl) -> [Int32]
    /// `x[b] = op(a[b])⁻¹ · b[b]` for triangular a ([n, n], its other triangle unread; op
    /// transposes when `transpose`; a unit diagonal when `unit`), b and x [n, k].
    func triangularSolve(
        _ a: TensorImpl, _ b: TensorImpl, upper: Bool, transpose: Bool, unit: Bool,
        into x: TensorImpl
    ) -> [Int32]
    /// The Cholesky factor of each symmetric positive-definite a[b] ([n, n], read from the
    /// lower triangle, or the upper when `upper`): L with a = L·Lᵀ (or U with a = Uᵀ·U), zeros
    /// in the other triangle.
    func cholesky(_ a: TensorImpl, upper: Bool, into out: TensorImpl) -> [Int32]
    /// Eigenvalues (ascending, [B, n]) and, when `vectors` is given, orthonormal eigenvectors
    /// (its columns, [B, n, n]) of each symmetric a[b], read from one triangle.
    func eigh(_ a: TensorImpl, upper: Bool, values: TensorImpl, vectors: TensorImpl?) -> [Int32]
    /// Singular values (descending, [B, k], k = min(m, n)) and, when `u` and `vh` are given, the
    /// singular vectors: u [B, m, k] and vh [B, k, n], or [B, m, m] and [B, n, n] when `full`.
    func svd(_ a: TensorImpl, full: Bool, s: TensorImpl, u: TensorImpl?, vh: TensorImpl?) -> [Int32]
    /// LAPACK's geqrf: R on and above the diagonal of `qr` (a's shape) and the Householder
    /// reflectors below it, their scales in `tau` ([B, min(m, n)]).
    func geqrf(_ a: TensorImpl, into qr: TensorImpl, tau: TensorImpl) -> [Int32]
    /// The first q.shape[2] columns of the product of the reflectors stored below the diagonal
    /// of a ([B, m, n]) with scales tau ([B, k]) (LAPACK's orgqr; columns of a beyond n read as
    /// zeros).
    func householderProduct(_ a: TensorImpl, tau: TensorImpl, into q: TensorImpl) -> [Int32]
    /// LAPACK's sytrf with the lower triangle: the Bunch-Kaufman LDLᵀ factorization of each
    /// symmetric a[b] ([n, n], its lower triangle read) packed into the lower triangle of `ld`
    /// (zeros above), and its pivots (int32 [B, n]; negative for 2 x 2 blocks).
    func ldlFactor(_ a: TensorImpl, into ld: TensorImpl, pivots: TensorImpl) -> [Int32]
    /// LAPACK's sytrs: `x[b] = A⁻¹·b[b]` for A given by `ldlFactor`'s ld and pivots (b and x
    /// [B, n, k]).
    func ldlSolve(_ ld: TensorImpl, pivots: TensorImpl, _ b: TensorImpl, into x: TensorImpl) -> [Int32]
}

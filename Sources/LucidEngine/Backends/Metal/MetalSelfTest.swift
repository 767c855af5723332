#if canImport(Metal) && !LUCID_NO_METAL
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The Metal backend checks itself before it serves "metal": every kernel it has runs on
/// small fixed random inputs and is compared with the host kernels on the same inputs, one
/// kernel library (family) at a time. A family with a kernel that disagrees, or fails, runs on
/// the host instead (with a warning naming it); a failure of the core (the fills and copies)
/// keeps all of "metal" on the host fallback. So a Mac never gives silently wrong numbers.
/// `lucid.metal.self_test()` runs it on demand and returns every check. A library that passed
/// is remembered (`MetalSelfTestCache`) and not checked again until its source, the device or
/// the system changes.
///
/// The checks are a table with a row per kernel (`table`), grouped by kernel family: adding a
/// kernel adds a row.
enum MetalSelfTest {
    struct Check: Sendable {
        let op: String
        let dtype: DType
        /// Largest |metal − host| / (1 + |host|); 0 when both are NaN; infinite when only one is.
        let maxError: Double
        let tolerance: Double
        /// What went wrong beyond the numbers (the compiler's message); empty otherwise.
        var detail = ""
        /// The family of the kernel checked; nil for the backend's core (fills and copies).
        var family: KernelFamily? = nil
        var passed: Bool { maxError <= tolerance }
    }

    /// One row of the table: a kernel of a family (nil: the backend's core, its fills and
    /// copies), the dtypes it is checked in, and its checks, which `body` makes for one dtype
    /// at a time (`Case.dtype`).
    struct Row: Sendable {
        let family: KernelFamily?
        let name: String
        let dtypes: [DType]
        let body: @Sendable (Case) -> Void

        init(_ family: KernelFamily?, _ name: String, _ dtypes: [DType], _ body: @escaping @Sendable (Case) -> Void) {
            (self.family, self.name, self.dtypes, self.body) = (family, name, dtypes, body)
        }
    }

    static let floats: [DType] = [.float32, .float16, .bfloat16]
    static let integers: [DType] = [.int32, .int64]
    /// The 8- and 16-bit integers, which have fills and casts only (their other kernels run on
    /// the host).
    static let smallIntegers: [DType] = [.uint8, .int8, .int16]
    /// The dtypes in the order the table is walked: each dtype's rows run together.
    static let dtypes: [DType] = floats + integers + [.bool] + smallIntegers

    /// The checks of the libraries of `families` (every library when nil), library by
    /// library, each walking the dtypes from the same first inputs (so that one library's
    /// checks do not depend on which others run). A library that did not compile, or whose pipelines did not build, has one
    /// failed check, `compile_library`, with the message.
    static func run(_ gpu: MetalBackend, families: Set<KernelFamily>? = nil) -> [Check] {
        var checks: [Check] = []
        for library in gpu.kernelLibraries where families?.contains(library.family) ?? true {
            if let message = library.error {
                checks.append(
                    Check(
                        op: "compile_library", dtype: .float32, maxError: .infinity, tolerance: 0, detail: message,
                        family: library.family))
                continue
            }
            let c = Case(gpu)
            let rows = table.filter { ($0.family ?? MetalKernelLibrary.coreFamily) == library.family }
            for dtype in dtypes {
                c.begin(dtype)
                for row in rows where row.dtypes.contains(dtype) {
                    let before = c.checks.count
                    row.body(c)
                    c.setFamily(row.family, from: before)
                }
            }
            checks += c.checks
        }
        // The checks' buffers (a split reduction's input among them) were for the checks: none
        // is kept in the buffer cache for the program.
        gpu.synchronize()
        _ = gpu.emptyCache()
        return checks
    }

    /// What a row checks with: the GPU, the dtype being checked and its inputs, and the checks
    /// made so far.
    final class Case {
        let gpu: MetalBackend
        private(set) var checks: [Check] = []
        /// The inputs' source: the same numbers on every run, drawn as a library's rows are
        /// walked (each library from the start).
        var rng: SelfTestNumbers
        private(set) var dtype: DType = .float32
        /// The dtype's inputs, 51 values each, made once per dtype and written to both backends:
        /// for the floating dtypes `a` in (-2, 2) and `b` in [0.25, 2.25); for int32 and int64
        /// whole numbers in (-50, 50); for the small integers whole numbers in (-100000, 100000)
        /// in `a` only; none for bool, whose row draws its own.
        private(set) var a: [Float] = [], b: [Float] = []

        init(_ gpu: MetalBackend) {
            self.gpu = gpu
            rng = SelfTestNumbers(seed: 0x6c75_6369_64)
        }

        /// Marks the checks from index `start` on as checks of `family`.
        func setFamily(_ family: KernelFamily?, from start: Int) {
            for i in start..<checks.count { checks[i].family = family }
        }

        func begin(_ dtype: DType) {
            self.dtype = dtype
            if MetalSelfTest.floats.contains(dtype) {
                a = rng.values(51, scale: 2)
                b = rng.values(51, scale: 2).map { abs($0) + 0.25 }
            } else if MetalSelfTest.integers.contains(dtype) {
                a = rng.values(51, scale: 50).map { $0.rounded() }
                b = rng.values(51, scale: 50).map { $0.rounded() }
            } else if MetalSelfTest.smallIntegers.contains(dtype) {
                (a, b) = (rng.values(51, scale: 100_000).map { $0.rounded() }, [])
            } else {
                (a, b) = ([], [])
            }
        }

        /// The floating dtypes' tolerance, float32's for the others.
        var tol: Double { dtype == .float32 ? 1e-5 : (dtype == .float16 ? 2e-3 : 1.6e-2) }

        func append(_ check: Check) { checks.append(check) }

        /// A check of `op` that could not run.
        func failed(_ op: String, _ tol: Double) {
            checks.append(Check(op: op, dtype: dtype, maxError: .infinity, tolerance: tol))
        }

        /// `outputs` on the GPU against `outputs` on the host kernels.
        func compare(_ op: String, _ tol: Double, _ outputs: (any Backend) throws -> TensorImpl) {
            let error: Double
            do {
                let m = try outputs(gpu), h = try outputs(Backends.host)
                error = MetalSelfTest.maxError(try MetalSelfTest.values(m, gpu), try MetalSelfTest.values(h, Backends.host))
            } catch {
                return failed(op, tol)
            }
            checks.append(Check(op: op, dtype: dtype, maxError: error, tolerance: tol))
        }

        /// `output` on the GPU against the values `want`.
        func check(_ op: String, _ tol: Double, want: [Double], _ output: () throws -> TensorImpl) {
            let error = (try? MetalSelfTest.values(try output(), gpu)).map { MetalSelfTest.maxError($0, want) } ?? .infinity
            checks.append(Check(op: op, dtype: dtype, maxError: error, tolerance: tol))
        }
    }

    /// The shape most checks run at: 51 elements, so vectorised kernels end part-way.
    static let shape = [3, 17]

    /// Every kernel's checks, family by family.
    static let table: [Row] =
        probeRows + coreRows + elementwiseRows + reductionRows + convolutionRows + poolingRows
        + softmaxRows + attentionRows + normalizationRows + indexingRows + optimizerRows + ampRows + matmulRows

    /// Where float16 products run: on MPS only if it sums them in float32 (a float16 sum loses
    /// bits). Found first, before any product is checked, and reported, not failed.
    private static let probeRows: [Row] = [
        Row(.matmul, "mps_float16_sums", [.float32]) { c in
            if let check = probe(c.gpu) { c.append(check) }
        }
    ]

    /// Finds where float16 products run (`probeFloat16Sums`), warning when MPS sums them in
    /// float16; the report's check. Also run when the matmul library's checks are skipped (their
    /// pass remembered), since the answer is kept in the process only.
    static func probe(_ gpu: MetalBackend) -> Check? {
        guard let sum = gpu.probeFloat16Sums() else { return nil }
        let wide = sum == 4096
        if !wide {
            Warnings.emit(
                "metal: Metal Performance Shaders sums float16 products in float16 on this GPU (a probe "
                    + "gave \(sum) for 4096); float16 products run lucid's gemm_simd_float16 kernel instead")
        }
        return Check(
            op: "mps_float16_sums", dtype: .float16, maxError: Double(abs(sum - 4096)) / 4097,
            tolerance: .infinity,
            detail: wide
                ? "float32 sums: float16 products run on Metal Performance Shaders"
                : "float16 sums: float16 products run gemm_simd_float16")
    }

    /// The backend's own fills and copies (casts among them).
    private static let coreRows: [Row] = [
        Row(nil, "fill", floats) { c in
            c.compare("fill", c.tol) { be in
                let t = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                be.fill(t, with: Scalar(0.3))
                return t
            }
        },
        Row(nil, "copy", floats) { c in
            c.compare("copy", c.tol) { be in
                let src = try make(c.a, [17, 3], .float32, be)
                let t = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                be.copy(src.view(shape: shape, strides: [1, 3], offset: 0), into: t)
                return t
            }
        },
        // Casts to integers truncate and saturate (NaN to 0); from integers, one rounding.
        Row(nil, "cast_to", floats) { c in
            let wide = [Float.nan, .infinity, -.infinity, 3e9, -3e9, 0.5, -0.5] + c.a.dropFirst(7).map { $0 * 1000 }
            for target in [DType.int32, .int64, .bool] {
                c.compare("cast_to_\(target.name)", 0) { be in
                    let out = try TensorImpl.empty(shape, dtype: target, on: be)
                    be.copy(try make(wide, shape, c.dtype, be), into: out)
                    return out
                }
            }
        },
        Row(nil, "cast_from_int64", floats) { c in
            c.compare("cast_from_int64", 0) { be in
                let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                be.copy(try make(c.a.map { ($0 * 3e6).rounded() }, shape, .int64, be), into: out)
                return out
            }
        },
        // The small integers: from floats truncated then wrapped, from the other integers
        // wrapped, and back.
        Row(nil, "fill", smallIntegers) { c in
            c.compare("fill", 0) { be in
                let t = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                be.fill(t, with: Scalar(int: -3))
                return t
            }
        },
        Row(nil, "cast_from", smallIntegers) { c in
            let ints = c.a
            let wide = [Float.nan, .infinity, -.infinity, 3e9, -3e9, 300.7, -300.7, 255.5, -0.5] + ints.dropFirst(9)
            for source in [DType.float32, .float16, .bfloat16, .int32, .int64, .bool, .uint8, .int8, .int16] where source != c.dtype {
                c.compare("cast_from_\(source.name)", 0) { be in
                    let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    be.copy(try make(source.isFloatingPoint ? wide : ints, shape, source, be), into: out)
                    return out
                }
            }
        },
        Row(nil, "cast_to", smallIntegers) { c in
            for target in [DType.float32, .float16, .bfloat16, .int32, .int64, .bool] {
                c.compare("cast_to_\(target.name)", 0) { be in
                    let out = try TensorImpl.empty(shape, dtype: target, on: be)
                    be.copy(try make(c.a, [17, 3], c.dtype, be).view(shape: shape, strides: [1, 3], offset: 0), into: out)
                    return out
                }
            }
        },
    ]

    private static let elementwiseRows: [Row] = [
        Row(.elementwise, "binary", floats) { c in
            for op in [
                BinaryKernel.add, .sub, .mul, .div, .pow, .maximum, .minimum, .atan2, .copysign, .fmod, .remainder,
                .floorDivide, .truncDivide, .fmax, .fmin, .heaviside,
            ] {
                c.compare("\(op)", c.tol) { be in
                    let x = try make(c.a, shape, c.dtype, be), y = try make(c.b, [1, 17], c.dtype, be)
                    let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    try kernels(be).binary(op, x, y.expanded(to: shape), into: out)
                    return out
                }
            }
        },
        // The same op on the other layouts: same-shape contiguous operands (4-wide vectors and a
        // partial run: 51 elements), and a layout of four dimensions that do not merge.
        Row(.elementwise, "add_contig", floats) { c in
            c.compare("add_contig", c.tol) { be in
                let x = try make(c.a, shape, c.dtype, be), y = try make(c.b, shape, c.dtype, be)
                let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                try kernels(be).binary(.add, x, y, into: out)
                return out
            }
        },
        Row(.elementwise, "mul_strided", floats) { c in
            c.compare("mul_strided", c.tol) { be in
                let x = try make(c.a, [2, 3, 2, 3], c.dtype, be), y = try make(c.b, [3, 2, 3, 2], c.dtype, be)
                let out = try TensorImpl.empty([2, 3, 2, 3], dtype: c.dtype, on: be)
                try kernels(be).binary(.mul, x, y.view(shape: [2, 3, 2, 3], strides: [1, 2, 6, 12], offset: 0), into: out)
                return out
            }
        },
        Row(.elementwise, "add_scalar", floats) { c in
            c.compare("add_scalar", c.tol) { be in
                let x = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                try kernels(be).binary(.sub, x, scalar: Scalar(0.75), scalarFirst: true, into: out)
                return out
            }
        },
        Row(.elementwise, "unary", floats) { c in
            for op in UnaryKernel.allCases where op.hasMetalKernel {
                let input = [.log, .sqrt, .rsqrt, .log1p, .log2, .log10, .acosh].contains(op) ? c.b : c.a
                c.compare(op.name, c.tol) { be in
                    let x = try make(input, shape, c.dtype, be), out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    try kernels(be).unary(op, x, into: out)
                    return out
                }
                c.compare("\(op.name)_backward", c.tol * 4) { be in
                    let x = try make(input, shape, c.dtype, be), g = try make(c.a, shape, c.dtype, be)
                    let y = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    let k = try kernels(be)
                    k.unary(op, x, into: y)
                    k.unaryBackward(op, x: x, y: y, grad: g, into: out)
                    return out
                }
            }
        },
        Row(.elementwise, "where", floats) { c in
            c.compare("where", 0) { be in
                let x = try make(c.a, shape, c.dtype, be), y = try make(c.b, shape, c.dtype, be)
                let cond = try TensorImpl.empty(shape, dtype: .bool, on: be)
                let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                let k = try kernels(be)
                k.compare(.gt, x, y, into: cond)
                k.select(cond, x, y, into: out)
                return out
            }
        },
        Row(.elementwise, "binary", integers) { c in
            for op in [
                BinaryKernel.add, .sub, .mul, .maximum, .minimum, .bitwiseAnd, .bitwiseOr, .bitwiseXor, .fmod,
                .remainder, .floorDivide, .truncDivide, .fmax, .fmin, .heaviside, .leftShift, .rightShift, .gcd, .lcm,
            ] {
                c.compare(Elementwise.info(op).name, 0) { be in
                    let x = try make(c.a, shape, c.dtype, be), y = try make(c.b, shape, c.dtype, be)
                    let out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    try kernels(be).binary(op, x, y, into: out)
                    return out
                }
            }
        },
        Row(.elementwise, "unary", integers) { c in
            for op in UnaryKernel.allCases where op.keepsIntegers && op.hasMetalKernel {
                c.compare(op.name, 0) { be in
                    let x = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                    try kernels(be).unary(op, x, into: out)
                    return out
                }
            }
        },
        Row(.elementwise, "compare", integers) { c in
            for op in CompareKernel.allCases {
                c.compare("\(op)", 0) { be in
                    let x = try make(c.a, shape, c.dtype, be), y = try make(c.b, shape, c.dtype, be)
                    let out = try TensorImpl.empty(shape, dtype: .bool, on: be)
                    try kernels(be).compare(op, x, y, into: out)
                    return out
                }
            }
        },
        // bool arithmetic and bitwise ops: computed as integers, stored as v != 0; inputs of
        // their own for each op.
        Row(.elementwise, "binary", [.bool]) { c in
            for op in [BinaryKernel.add, .mul, .bitwiseAnd, .bitwiseOr, .bitwiseXor] {
                let a = c.rng.values(51, scale: 1).map { $0 > 0 ? Float(1) : 0 }
                let b = c.rng.values(51, scale: 1).map { $0 > 0 ? Float(1) : 0 }
                c.compare(Elementwise.info(op).name, 0) { be in
                    let x = try make(a, shape, .bool, be), y = try make(b, shape, .bool, be)
                    let out = try TensorImpl.empty(shape, dtype: .bool, on: be)
                    try kernels(be).binary(op, x, y, into: out)
                    return out
                }
            }
        },
    ]

    private static let reductionRows: [Row] = [
        Row(.reduction, "reduce", floats) { c in
            for (op, axes) in [(ReduceKernel.sum, [1]), (.mean, [0])] {
                c.compare("\(op)", c.tol * 4) { be in
                    let x = try make(c.a, shape, c.dtype, be)
                    let out = try TensorImpl.empty(axes == [1] ? [3, 1] : [1, 17], dtype: c.dtype, on: be)
                    try reduction(be).reduce(op, x, axes: axes, into: out)
                    return out
                }
            }
        },
        Row(.reduction, "sum_long_rows", floats) { c in
            c.compare("sum_long_rows", c.tol * 4) { be in  // a threadgroup per output
                let x = try make(c.a, [2, MetalBackend.cooperativeLength + 88], c.dtype, be)
                let out = try TensorImpl.empty([2, 1], dtype: c.dtype, on: be)
                try reduction(be).reduce(.sum, x, axes: [1], into: out)
                return out
            }
        },
        // A SIMD group per output over rows of a few dozen elements (nine outputs: a
        // threadgroup's last SIMD groups have none), a mean and an argmax whose cycled inputs
        // tie, so the first index must win.
        Row(.reduction, "mean_rows_simd", floats) { c in
            c.compare("mean_rows_simd", c.tol * 4) { be in
                let x = try make(c.a, [9, MetalBackend.simdRowLength + 21], c.dtype, be)
                let out = try TensorImpl.empty([9, 1], dtype: c.dtype, on: be)
                try reduction(be).reduce(.mean, x, axes: [1], into: out)
                return out
            }
            c.compare("argmax_rows_simd", 0) { be in
                let x = try make(c.a, [9, MetalBackend.simdRowLength + 70], c.dtype, be)
                let values = try TensorImpl.empty([9], dtype: c.dtype, on: be)
                let indices = try TensorImpl.empty([9], dtype: .int64, on: be)
                try reduction(be).argReduce(max: true, x, axis: 1, values: values, indices: indices)
                return indices
            }
        },
        Row(.reduction, "sum_split", floats) { c in
            c.compare("sum_split", c.tol * 4) { be in  // several threadgroups per output, then their sums
                let x = try make(c.a, [MetalBackend.splitLength + 123], c.dtype, be)
                let out = try TensorImpl.empty([1], dtype: c.dtype, on: be)
                try reduction(be).reduce(.mean, x, axes: [0], into: out)
                return out
            }
        },
        // A threadgroup per output along a long axis; the cycled inputs repeat, so ties must go
        // to the first index.
        Row(.reduction, "argmax_long", floats) { c in
            c.compare("argmax_long", 0) { be in
                let x = try make(c.a, [2, MetalBackend.cooperativeLength + 77], c.dtype, be)
                let values = try TensorImpl.empty([2], dtype: c.dtype, on: be)
                let indices = try TensorImpl.empty([2], dtype: .int64, on: be)
                try reduction(be).argReduce(max: true, x, axis: 1, values: values, indices: indices)
                return indices
            }
        },
        Row(.reduction, "argmin_long_values", floats) { c in
            c.compare("argmin_long_values", 0) { be in
                let x = try make(c.a, [2, MetalBackend.cooperativeLength + 77], c.dtype, be)
                let values = try TensorImpl.empty([2], dtype: c.dtype, on: be)
                let indices = try TensorImpl.empty([2], dtype: .int64, on: be)
                try reduction(be).argReduce(
                    max: false, x.view(shape: [589, 2], strides: [1, 589]), axis: 0, values: values,
                    indices: indices)
                return values
            }
        },
        Row(.reduction, "argmax", floats) { c in
            c.compare("argmax", 0) { be in
                let x = try make(c.a, shape, c.dtype, be)
                let values = try TensorImpl.empty([3], dtype: c.dtype, on: be)
                let indices = try TensorImpl.empty([3], dtype: .int64, on: be)
                try reduction(be).argReduce(max: true, x, axis: 1, values: values, indices: indices)
                return indices
            }
        },
        Row(.reduction, "sum", integers) { c in
            c.compare("sum", 0) { be in
                let x = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty([1, 17], dtype: .int64, on: be)
                try reduction(be).reduce(.sum, x, axes: [0], into: out)
                return out
            }
        },
    ]

    /// Convolution's windows: padding, a stride and a dilation.
    private static let patches = WindowGeometry(
        kernel: (3, 2), stride: (2, 1), padding: (1, 1), dilation: (1, 2),
        input: (5, 7), output: (3, 7))

    private static let convolutionRows: [Row] = [
        // The window gathers and their adjoint.
        Row(.convolution, "im2col", floats) { c in
            c.compare("im2col", 0) { be in
                let x = try make(c.a, [2, 3, 5, 7], c.dtype, be), cols = try TensorImpl.empty([2, 18, 21], dtype: c.dtype, on: be)
                try convolution(be).im2col(x, patches, into: cols)
                return cols
            }
        },
        Row(.convolution, "col2im", floats) { c in
            c.compare("col2im", c.tol * 4) { be in
                let cols = try make(c.b, [2, 18, 21], c.dtype, be), x = try TensorImpl.empty([2, 3, 5, 7], dtype: c.dtype, on: be)
                try convolution(be).col2im(cols, patches, into: x)
                return x
            }
        },
        // The direct convolution passes (implicit GEMM) against plain loops over the same
        // rounded inputs: two groups, padding, a stride and a dilation.
        Row(.convolution, "convolution", floats) { c in
            let (gpu, dtype, tol) = (c.gpu, c.dtype, c.tol)
            let conv = ConvolutionProblem(batch: 2, channels: 4, outChannels: 6, groups: 2, patches, dtype: dtype)
            do {
                let x = try make(c.a, [2, 4, 5, 7], dtype, gpu), w = try make(c.b, [6, 2, 3, 2], dtype, gpu)
                let gy = try make(c.a.reversed(), [2, 6, 3, 7], dtype, gpu), bias = try make(c.b, [6], dtype, gpu)
                let (xv, wv, gv, bv) = (try values(x, gpu), try values(w, gpu), try values(gy, gpu), try values(bias, gpu))
                // Only where the kernels serve (a pipeline that cannot have a tile's threads
                // leaves convolution composed).
                for pass in [ConvolutionPassKind.forward, .backwardData, .backwardWeights]
                where (gpu.maxThreadsPerThreadgroup(MetalBackend.convolutionKernel(pass, dtype)) ?? 0) >= MetalBackend.simdGemmThreads {
                    let want = convolutionReference(pass, conv, x: xv, w: wv, gy: gv, bias: bv)
                    let shape = [[2, 6, 3, 7], x.shape, w.shape][pass.rawValue]
                    c.check(["conv_forward", "conv_backward_data", "conv_backward_weights"][pass.rawValue], tol * 4, want: want) {
                        let out = try TensorImpl.empty(shape, dtype: dtype, on: gpu)
                        try gpu.convolution(
                            pass, conv, x: pass == .backwardData ? nil : x, weight: pass == .backwardWeights ? nil : w,
                            bias: pass == .forward ? bias : nil, gradOut: pass == .forward ? nil : gy, into: out)
                        return out
                    }
                }
                // The weight pass split into chunks of 5 of its 42 terms: partial sums and
                // their sum.
                let weights = MetalBackend.convolutionKernel(.backwardWeights, dtype)
                if (gpu.maxThreadsPerThreadgroup(weights) ?? 0) >= MetalBackend.simdGemmThreads {
                    let want = convolutionReference(.backwardWeights, conv, x: xv, w: wv, gy: gv, bias: bv)
                    c.check("conv_backward_weights_split", tol * 4, want: want) {
                        let out = try TensorImpl.empty(w.shape, dtype: dtype, on: gpu)
                        try gpu.weightGradient(conv, x: x, gradOut: gy, into: out, chunk: 5)
                        return out
                    }
                }
            } catch {
                c.failed("conv_forward", tol)
            }
        },
    ]

    private static let poolingRows: [Row] = [
        Row(.pooling, "max_pool2d", floats) { c in
            let window = WindowGeometry(
                kernel: (2, 2), stride: (1, 2), padding: (0, 1), dilation: (1, 1),
                input: (3, 17), output: (2, 9))
            for backward in [false, true] {
                c.compare(backward ? "max_pool2d_backward" : "max_pool2d", c.tol) { be in
                    let x = try make(c.a, [3, 1, 3, 17], c.dtype, be)
                    let values = try TensorImpl.empty([3, 1, 2, 9], dtype: c.dtype, on: be)
                    let indices = try TensorImpl.empty([3, 1, 2, 9], dtype: .int64, on: be)
                    let k = try pooling(be)
                    k.maxPool2d(x, window, values: values, indices: indices)
                    guard backward else { return values }
                    let gradIn = try TensorImpl.empty([3, 1, 3, 17], dtype: c.dtype, on: be)
                    k.maxPool2dBackward(try make(c.b, [3, 1, 2, 9], c.dtype, be), indices: indices, window, into: gradIn)
                    return gradIn
                }
            }
        }
    ]

    private static let softmaxRows: [Row] = [
        // Without oneDNN (on a Mac) the host's own softmax covers float32 along the last axis
        // only, so the reference is computed here, in double, from the rounded inputs.
        Row(.softmax, "softmax", floats) { c in
            let (gpu, dtype) = (c.gpu, c.dtype)
            for (axis, log) in [(1, false), (0, true)] {
                let name = log ? "log_softmax" : "softmax"
                guard let x = try? make(c.a, shape, dtype, Backends.host), let rounded = try? values(x, Backends.host) else { continue }
                c.check(name, c.tol * 4, want: softmaxReference(rounded, shape, axis: axis, log: log)) {
                    let x = try make(c.a, shape, dtype, gpu), out = try TensorImpl.empty(shape, dtype: dtype, on: gpu)
                    guard gpu.softmaxRoute(KernelCall(.softmax(axis: axis, log: log), reads: [x], writes: [out])) == .native else {
                        throw LucidError.runtime("routed to be composed")
                    }
                    gpu.softmax(x, axis: axis, log: log, into: out)
                    return out
                }
            }
        },
        // Their backward from an output y and its gradient g, against double.
        Row(.softmax, "softmax_backward", floats) { c in
            let (gpu, dtype) = (c.gpu, c.dtype)
            for (axis, log) in [(1, false), (0, true)] {
                guard let y = try? make(c.b, shape, dtype, gpu), let g = try? make(c.a, shape, dtype, gpu),
                    let yv = try? values(y, gpu), let gv = try? values(g, gpu)
                else { continue }
                c.check(
                    log ? "log_softmax_backward" : "softmax_backward", c.tol * 4,
                    want: softmaxBackwardReference(gv, yv, shape, axis: axis, log: log)
                ) {
                    let out = try TensorImpl.empty(shape, dtype: dtype, on: gpu)
                    guard gpu.softmaxRoute(KernelCall(.softmaxBackward(axis: axis), reads: [g, y], writes: [out])) == .native else {
                        throw LucidError.runtime("routed to be composed")
                    }
                    gpu.softmaxBackward(g, y, axis: axis, log: log, into: out)
                    return out
                }
            }
        },
    ]

    private static let attentionRows: [Row] = [
        // Fused attention against double: the generic variants (heads of 20 and 72, values
        // 4 wider) unmasked with its weights, causal, and a bool mask with a row it masks
        // whole (NaN, as softmax over -inf gives); and the fixed-head variants of 32 (with its
        // weights), 64 (masked) and 80 (causal). 37 queries and 45 keys, so blocks end part-way.
        Row(.attention, "attention", floats) { c in
            let (gpu, dtype, tol, a, b) = (c.gpu, c.dtype, c.tol, c.a, c.b)
            let cases = [(20, 24, 0), (20, 24, 1), (20, 24, 2), (72, 76, 1), (32, 32, 0), (64, 64, 2), (80, 80, 1)]
            for (e, ev, masking) in cases {
                let (l, sl) = (37, 45)
                do {
                    let q = try make(a, [2, l, e], dtype, gpu), k = try make(b.map { -$0 }, [2, sl, e], dtype, gpu)
                    let v = try make(a.reversed(), [2, sl, ev], dtype, gpu)
                    var allowed = (0..<(l * sl)).map { Float(($0 * 7 + $0 / sl) % 5 == 0 ? 0 : 1) }
                    for j in 0..<sl { allowed[3 * sl + j] = 0 }
                    let mask = masking == 2 ? try make(allowed, [1, l, sl], .bool, gpu) : nil
                    let m3 = mask?.view(shape: [2, l, sl], strides: [0, sl, 1], offset: 0)
                    let scale = Float(1 / Double(e).squareRoot())
                    let (want, weights) = attentionReference(
                        try values(q, gpu), try values(k, gpu), try values(v, gpu),
                        batch: 2, l: l, s: sl, e: e, ev: ev, scale: Double(scale),
                        causal: masking == 1, allowed: masking == 2 ? allowed.map(Double.init) : nil)
                    let name = masking == 0 ? "attention" : (masking == 1 ? "attention_causal" : "attention_mask")
                    let p = try TensorImpl.empty([2, l, sl], dtype: dtype, on: gpu)
                    let call = KernelCall(.attention, reads: Operands([q, k, v] + (m3.map { [$0] } ?? [])), writes: [])
                    guard gpu.attentionRoute(call) == .native else { continue }
                    // Named by the variant: "_h<e>" for a fixed head, "_128" for the wider generic one.
                    let suffix = e == ev ? "_h\(e)" : (e > 64 ? "_128" : "")
                    c.check(name + suffix, tol * 4, want: want) {
                        let out = try TensorImpl.empty([2, l, ev], dtype: dtype, on: gpu)
                        try gpu.attention(q, k, v, mask: m3, scale: scale, causal: masking == 1, weights: masking == 0 ? p : nil, into: out)
                        return out
                    }
                    if masking == 0 { c.check("attention_weights" + suffix, tol * 4, want: weights) { p } }
                } catch {
                    c.failed("attention", tol)
                }
            }
        }
    ]

    private static let normalizationRows: [Row] = [
        Row(.normalization, "normalize_rows", floats) { c in
            // Per column, unweighted into float32, and per channel (group_norm's layout: three
            // rows of one channel each, reading entries 0, 1, 2).
            let cases = [
                ("normalize_rows", false, RowAffine.perColumn), ("normalize_rows_to_float32", true, .perColumn),
                ("normalize_rows_by_channel", false, RowAffine(groups: 3, span: 17)),
            ]
            for (name, wide, affine) in cases where !(wide && c.dtype == .float32) {
                c.compare(name, c.tol * 4) { be in
                    let count = affine.parameters(17)
                    let x = try make(c.a, shape, c.dtype, be), w = try make(Array(c.b.prefix(count)), [count], .float32, be)
                    let bias = try make(Array(c.a.prefix(count)), [count], .float32, be)
                    let out = try TensorImpl.empty(shape, dtype: wide ? .float32 : c.dtype, on: be)
                    let mean = try TensorImpl.empty([3], dtype: .float32, on: be), rstd = try TensorImpl.empty([3], dtype: .float32, on: be)
                    try normalization(be).normalizeRows(
                        x, rows: 3, eps: 1e-5, weight: wide ? nil : w, bias: wide ? nil : bias, affine: affine,
                        into: out, mean: mean, rstd: rstd)
                    return out
                }
            }
        }
    ]

    private static let indexingRows: [Row] = [
        Row(.indexing, "gather", floats) { c in
            c.compare("gather", 0) { be in
                let x = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty([3, 7], dtype: c.dtype, on: be)
                let index = try make((0..<21).map { Float(($0 * 7) % 17) }, [3, 7], .int64, be)
                try indexing(be).gather(x, dim: 1, index: index, into: out) { _ in
                    LucidError.runtime("an index in range was reported out of range")
                }
                if let error = be.takeDeferredError() { throw error }
                return out
            }
        },
        Row(.indexing, "scatter_add", floats) { c in
            c.compare("scatter_add", c.tol * 4) { be in
                let src = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty([3, 4], dtype: c.dtype, on: be)
                let index = try make((0..<51).map { Float(($0 * 5) % 4) }, shape, .int64, be)
                try indexing(be).scatterAdd(src, dim: 1, index: index, into: out)
                return out
            }
        },
        Row(.indexing, "scatter_add_long", floats) { c in
            c.compare("scatter_add_long", c.tol * 4) { be in  // embedding's backward: long lines, atomic adds
                let tokens = MetalBackend.atomicLineLength * 3 + 5
                let src = try make(c.a, [tokens, 3], c.dtype, be), out = try TensorImpl.empty([5, 3], dtype: c.dtype, on: be)
                let index = try make((0..<tokens * 3).map { Float(($0 / 3 * 7) % 5) }, [tokens, 3], .int64, be)
                try indexing(be).scatterAdd(src, dim: 0, index: index, into: out)
                return out
            }
        },
    ]

    private static let adam = AdamHyper(
        lr: 0.01, beta1: 0.9, beta2: 0.999, eps: 1e-8, weightDecay: 0.1, decoupled: true,
        maximize: false)

    private static let optimizerRows: [Row] = [
        Row(.optimizers, "sgd_step", floats) { c in
            c.compare("sgd_step", c.tol * 4) { be in
                let p = try make(c.a, shape, c.dtype, be), g = try make(c.b, shape, c.dtype, be)
                let buf = try make(c.a, shape, c.dtype, be)
                let np = try TensorImpl.empty(shape, dtype: c.dtype, on: be), nb = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                let h = SGDHyper(
                    lr: 0.1, momentum: 0.9, dampening: 0.1, weightDecay: 0.01, nesterov: true, maximize: false,
                    firstStep: false)
                try optimizers(be).sgdStep(
                    param: p, grad: g, momentum: buf, hyper: h, newParam: np, newMomentum: nb,
                    skipIf: try make([0], [1], .float32, be))
                return np
            }
        },
        Row(.optimizers, "adam_step", floats) { c in
            c.compare("adam_step", c.tol * 4) { be in
                let p = try make(c.a, shape, c.dtype, be), g = try make(c.b, shape, c.dtype, be)
                let m = try make(c.a, shape, c.dtype, be), v = try make(c.b, shape, c.dtype, be)
                let step = try make([2], [1], .float32, be)
                let outs = try (0..<3).map { _ in try TensorImpl.empty(shape, dtype: c.dtype, on: be) }
                try optimizers(be).adamStep(
                    param: p, grad: g, m: m, v: v, step: step, hyper: adam, newParam: outs[0],
                    newM: outs[1], newV: outs[2], skipIf: nil)
                return outs[0]
            }
        },
        Row(.optimizers, "adam_skip", floats) { c in
            c.compare("adam_skip", 0) { be in  // a set flag: the parameter stays as it is
                let p = try make(c.a, shape, c.dtype, be), g = try make(c.b, shape, c.dtype, be)
                let m = try make(c.a, shape, c.dtype, be), v = try make(c.b, shape, c.dtype, be)
                let step = try make([2], [1], .float32, be)
                try optimizers(be).adamStep(
                    param: p, grad: g, m: m, v: v, step: step, hyper: adam, newParam: p, newM: m,
                    newV: v, skipIf: try make([1], [1], .float32, be))
                return p
            }
        },
        Row(.optimizers, "adam_count", floats) { c in
            let gpu = c.gpu
            c.check("adam_count", 0, want: [2]) {  // counts the step taken (1 to 2), not the one skipped
                let p = try make(c.a, shape, c.dtype, gpu), g = try make(c.b, shape, c.dtype, gpu)
                let step = try make([1], [1], .float32, gpu)
                for flag: Float in [0, 1] {
                    try optimizers(gpu).adamStep(
                        param: p, grad: g, m: g, v: g, step: step, hyper: adam, newParam: p,
                        newM: p, newV: p, skipIf: try make([flag], [1], .float32, gpu))
                }
                return step
            }
        },
    ]

    private static let ampRows: [Row] = [
        Row(.amp, "unscale", floats) { c in
            c.compare("unscale", c.tol) { be in
                let g = try make(c.a, shape, c.dtype, be), out = try TensorImpl.empty(shape, dtype: c.dtype, on: be)
                let inv = try make([0.125], [1], .float32, be), found = try make([0], [1], .float32, be)
                try amp(be).unscale([g], invScale: inv, found: found, into: [out])
                return out
            }
        },
        Row(.amp, "unscale_found", floats) { c in
            let gpu = c.gpu
            c.check("unscale_found", 0, want: [1]) {
                let g = try make([1, .infinity, 2], [3], c.dtype, gpu), out = try TensorImpl.empty([3], dtype: c.dtype, on: gpu)
                let inv = try make([0.5], [1], .float32, gpu), found = try make([0], [1], .float32, gpu)
                try amp(gpu).unscale([g], invScale: inv, found: found, into: [out])
                return found
            }
        },
        // Autocast inspection's counters: every band, two threadgroups adding into one block,
        // and a second block; the words must agree exactly.
        Row(.amp, "cast_statistics", floats) { c in
            c.compare("cast_statistics", 0) { be in
                let specials: [Float] = [1e5, 1e-6, 0, -2.5, .infinity, .nan, 3.4e38, 1e-39, 65520, -7, 6e-5, 2]
                let x = try make(specials, [5003], c.dtype, be)
                let acc = try make([0], [2 * CastStatistics.blockWords], .int32, be)
                try amp(be).castStatistics(x, into: acc, word: 0)
                try amp(be).castStatistics(x, into: acc, word: 0)
                try amp(be).castStatistics(try make(c.a, shape, c.dtype, be), into: acc, word: CastStatistics.blockWords)
                return acc
            }
        },
        Row(.amp, "update_scale", [.float32]) { c in
            let gpu = c.gpu
            c.check("update_scale", 0, want: [1024, 1]) {
                let scale = try make([1024], [1], .float32, gpu), tracker = try make([1], [1], .int32, gpu)
                let u = ScaleUpdate(growthFactor: 2, backoffFactor: 0.5, growthInterval: 2)
                for flag: Float in [0, 0, 1, 0] {  // grows, counts, backs off, counts
                    try amp(gpu).updateScale(scale, growthTracker: tracker, found: try make([flag], [1], .float32, gpu), u)
                }
                let out = try TensorImpl.empty([2], dtype: .float32, on: gpu)
                gpu.copy(scale, into: out.view(shape: [1], strides: [1]))
                gpu.copy(tracker, into: out.view(shape: [1], strides: [1], offset: 1))
                return out
            }
        },
    ]

    private static let matmulRows: [Row] = [
        Row(.matmul, "matmul", floats) { c in
            c.compare("matmul", c.tol * 8) { be in
                let x = try make(c.a, [3, 17], c.dtype, be), y = try make(c.b, [17, 3], c.dtype, be)
                let out = try TensorImpl.empty([1, 3, 3], dtype: c.dtype, on: be)
                try matmul(be).gemm(
                    x.view(shape: [1, 3, 17], strides: [0, 17, 1], offset: 0),
                    y.view(shape: [1, 17, 3], strides: [0, 3, 1], offset: 0), bias: nil, into: out)
                return out
            }
        },
        // The SIMD-group kernels, on either tile: two batches of partial tiles, k not a multiple
        // of their 16-wide slices, a bias, and a transposed b shared by both batches (stride 0).
        Row(.matmul, "matmul_simd", floats) { c in
            for (op, tile) in [("matmul_simd", SimdTile.small), ("matmul_simd64", .large)] {
                c.compare(op, c.tol * 8) { be in
                    let x = try make(c.a, [2, 37, 41], c.dtype, be), w = try make(c.b, [35, 41], c.dtype, be)
                    let bias = try make(c.a, [35], c.dtype, be)
                    let out = try TensorImpl.empty([2, 37, 35], dtype: c.dtype, on: be)
                    let (a3, b3) = (
                        x.view(shape: [2, 37, 41], strides: [37 * 41, 41, 1], offset: 0),
                        w.view(shape: [2, 41, 35], strides: [0, 1, 41], offset: 0)
                    )
                    if let gpu = be as? MetalBackend {
                        gpu.gemmKernel(a3, b3, bias: bias, into: out, tile: tile)
                    } else {
                        try matmul(be).gemm(a3, b3, bias: bias, into: out)
                    }
                    return out
                }
            }
        },
        Row(.matmul, "linear", floats) { c in
            c.compare("linear", c.tol * 8) { be in
                let x = try make(c.a, [3, 17], c.dtype, be), w = try make(c.b, [3, 17], c.dtype, be)
                let bias = try make(c.a, [3], c.dtype, be)
                let out = try TensorImpl.empty([1, 3, 3], dtype: c.dtype, on: be)
                try matmul(be).gemm(
                    x.view(shape: [1, 3, 17], strides: [0, 17, 1], offset: 0),
                    w.view(shape: [1, 17, 3], strides: [0, 1, 17], offset: 0), bias: bias, into: out)
                return out
            }
        },
        Row(.matmul, "matmul", integers) { c in
            c.compare("matmul", 0) { be in
                let x = try make(c.a, [3, 17], c.dtype, be), y = try make(c.b, [17, 3], c.dtype, be)
                let out = try TensorImpl.empty([1, 3, 3], dtype: c.dtype, on: be)
                try matmul(be).gemm(
                    x.view(shape: [1, 3, 17], strides: [0, 17, 1], offset: 0),
                    y.view(shape: [1, 17, 3], strides: [0, 3, 1], offset: 0), bias: nil, into: out)
                return out
            }
        },
    ]

    /// Softmax (or log-softmax) along `axis` of a row-major array, in double.
    private static func softmaxReference(_ x: [Double], _ shape: [Int], axis: Int, log takeLog: Bool) -> [Double] {
        let length = shape[axis], inner = shape[(axis + 1)...].reduce(1, *)
        var out = x
        for row in 0..<(x.count / length) {
            let base = (row / inner) * length * inner + row % inner
            let items = (0..<length).map { x[base + $0 * inner] }
            let m = items.max()!, total = items.reduce(0) { $0 + exp($1 - m) }
            for k in 0..<length {
                out[base + k * inner] = takeLog ? items[k] - m - log(total) : exp(items[k] - m) / total
            }
        }
        return out
    }

    /// The backward of softmax (or log-softmax) along `axis` from its output y and gradient g,
    /// in double.
    private static func softmaxBackwardReference(
        _ g: [Double], _ y: [Double], _ shape: [Int], axis: Int,
        log takeLog: Bool
    ) -> [Double] {
        let length = shape[axis], inner = shape[(axis + 1)...].reduce(1, *)
        var out = y
        for row in 0..<(y.count / length) {
            let base = (row / inner) * length * inner + row % inner
            let at = (0..<length).map { base + $0 * inner }
            let sum = at.reduce(0) { $0 + (takeLog ? g[$1] : g[$1] * y[$1]) }
            for i in at { out[i] = takeLog ? g[i] - exp(y[i]) * sum : y[i] * (g[i] - sum) }
        }
        return out
    }

    /// Attention in double: the output [batch, l, ev] and the weights [batch, l, s] of q·kᵀ·scale
    /// (row-major operands), masked where `allowed` ([l, s]) is 0 or, when `causal`, after each
    /// row's own position; a row with nothing allowed is NaN.
    private static func attentionReference(
        _ q: [Double], _ k: [Double], _ v: [Double], batch: Int, l: Int, s: Int, e: Int,
        ev: Int, scale: Double, causal: Bool, allowed: [Double]?
    ) -> ([Double], [Double]) {
        var out = [Double](repeating: 0, count: batch * l * ev), weights = [Double](repeating: 0, count: batch * l * s)
        for b in 0..<batch {
            for i in 0..<l {
                let scores = (0..<s).map { j -> Double in
                    if causal && j > i || allowed.map({ $0[i * s + j] == 0 }) == true { return -.infinity }
                    return (0..<e).reduce(0) { $0 + q[(b * l + i) * e + $1] * k[(b * s + j) * e + $1] } * scale
                }
                let m = scores.max()!, total = scores.reduce(0) { $0 + exp($1 - m) }
                for j in 0..<s { weights[(b * l + i) * s + j] = m == -.infinity ? .nan : exp(scores[j] - m) / total }
                for c in 0..<ev {
                    out[(b * l + i) * ev + c] = (0..<s).reduce(0) { $0 + weights[(b * l + i) * s + $1] * v[(b * s + $1) * ev + c] }
                }
            }
        }
        return (out, weights)
    }

    /// A family of `be`'s kernels, or an error naming it (a check of a family `be` lacks fails).
    private static func family<K>(_ kernels: K?, _ name: String) throws -> K {
        guard let kernels else { throw LucidError.runtime("no \(name) kernels") }
        return kernels
    }

    private static func kernels(_ be: any Backend) throws -> any ElementwiseKernels { try family(be as? any ElementwiseKernels, "elementwise") }
    private static func reduction(_ be: any Backend) throws -> any ReductionKernels { try family(be as? any ReductionKernels, "reduction") }
    private static func pooling(_ be: any Backend) throws -> any PoolingKernels { try family(be as? any PoolingKernels, "pooling") }
    private static func normalization(_ be: any Backend) throws -> any NormalizationKernels {
        try family(be as? any NormalizationKernels, "normalization")
    }
    private static func indexing(_ be: any Backend) throws -> any IndexingKernels { try family(be as? any IndexingKernels, "indexing") }
    private static func optimizers(_ be: any Backend) throws -> any OptimizerKernels { try family(be as? any OptimizerKernels, "optimizer") }
    private static func amp(_ be: any Backend) throws -> any AMPKernels { try family(be as? any AMPKernels, "AMP") }
    private static func matmul(_ be: any Backend) throws -> any MatmulKernels { try family(be as? any MatmulKernels, "matmul") }
    private static func convolution(_ be: any Backend) throws -> any ConvolutionKernels {
        try family(be as? any ConvolutionKernels, "convolution")
    }

    /// A grouped convolution pass computed plainly in double from contiguous operands: the
    /// output (plus `bias`), the input gradient, or the weight gradient.
    private static func convolutionReference(
        _ pass: ConvolutionPassKind, _ p: ConvolutionProblem, x: [Double], w: [Double],
        gy: [Double], bias: [Double]
    ) -> [Double] {
        let cg = p.channels / p.groups, og = p.outChannels / p.groups
        var out = [Double](repeating: 0, count: [gy.count, x.count, w.count][pass.rawValue])
        for n in 0..<p.batch {
            for o in 0..<p.outChannels {
                for oy in 0..<p.outH {
                    for ox in 0..<p.outW {
                        let yi = ((n * p.outChannels + o) * p.outH + oy) * p.outW + ox
                        for c in 0..<cg {
                            for ky in 0..<p.kH {
                                for kx in 0..<p.kW {
                                    let iy = oy * p.strideH - p.padH + ky * p.dilH, ix = ox * p.strideW - p.padW + kx * p.dilW
                                    guard iy >= 0, iy < p.inH, ix >= 0, ix < p.inW else { continue }
                                    let xi = ((n * p.channels + o / og * cg + c) * p.inH + iy) * p.inW + ix
                                    let wi = ((o * cg + c) * p.kH + ky) * p.kW + kx
                                    switch pass {
                                    case .forward: out[yi] += w[wi] * x[xi]
                                    case .backwardData: out[xi] += w[wi] * gy[yi]
                                    case .backwardWeights: out[wi] += gy[yi] * x[xi]
                                    }
                                }
                            }
                        }
                        if pass == .forward { out[yi] += bias[o] }
                    }
                }
            }
        }
        return out
    }

    /// A tensor of `dtype` on `be` holding `values` (rounded as the host rounds them).
    private static func make(_ values: [Float], _ shape: [Int], _ dtype: DType, _ be: any Backend) throws -> TensorImpl {
        let t = try TensorImpl.empty(shape, dtype: dtype, on: be)
        let n = t.numel
        var bytes: [UInt8] = []
        for i in 0..<n {
            let v = values[i % values.count]
            switch dtype {
            case .float32: withUnsafeBytes(of: v) { bytes += $0 }
            case .float16: withUnsafeBytes(of: floatToHalf(v)) { bytes += $0 }
            case .bfloat16: withUnsafeBytes(of: floatToBFloat(v)) { bytes += $0 }
            case .int32: withUnsafeBytes(of: Int32(v)) { bytes += $0 }
            case .int64: withUnsafeBytes(of: Int64(v)) { bytes += $0 }
            case .bool: bytes.append(v != 0 ? 1 : 0)
            case .float64: withUnsafeBytes(of: Double(v)) { bytes += $0 }
            case .uint8: bytes.append(UInt8(truncatingIfNeeded: Int64(v)))
            case .int8: withUnsafeBytes(of: Int8(truncatingIfNeeded: Int64(v))) { bytes += $0 }
            case .int16: withUnsafeBytes(of: Int16(truncatingIfNeeded: Int64(v))) { bytes += $0 }
            }
        }
        bytes.withUnsafeBytes { be.write($0, into: t) }
        return t
    }

    /// The values of a contiguous tensor, as doubles.
    private static func values(_ t: TensorImpl, _ be: any Backend) throws -> [Double] {
        var bytes = [UInt8](repeating: 0, count: t.numel * t.dtype.itemSize)
        bytes.withUnsafeMutableBytes { be.read(t, into: $0) }
        return bytes.withUnsafeBytes { raw in
            (0..<t.numel).map { i -> Double in
                switch t.dtype {
                case .float32: return Double(raw.load(fromByteOffset: i * 4, as: Float.self))
                case .float16: return Double(halfToFloat(raw.load(fromByteOffset: i * 2, as: UInt16.self)))
                case .bfloat16: return Double(bfloatToFloat(raw.load(fromByteOffset: i * 2, as: UInt16.self)))
                case .int32: return Double(raw.load(fromByteOffset: i * 4, as: Int32.self))
                case .int64: return Double(raw.load(fromByteOffset: i * 8, as: Int64.self))
                case .bool: return Double(raw[i])
                case .float64: return raw.load(fromByteOffset: i * 8, as: Double.self)
                case .uint8: return Double(raw[i])
                case .int8: return Double(raw.load(fromByteOffset: i, as: Int8.self))
                case .int16: return Double(raw.load(fromByteOffset: i * 2, as: Int16.self))
                }
            }
        }
    }

    private static func maxError(_ got: [Double], _ want: [Double]) -> Double {
        guard got.count == want.count else { return .infinity }
        var worst = 0.0
        for (g, w) in zip(got, want) {
            if g.isNaN && w.isNaN { continue }
            if g == w { continue }  // equal infinities too
            let e = abs(g - w) / (1 + abs(w))
            worst = max(worst, e.isNaN ? .infinity : e)
        }
        return worst
    }
}

/// A small deterministic generator for the self-test's inputs (the same numbers on every run).
struct SelfTestNumbers {
    private var state: UInt64
    init(seed: UInt64) { state = seed }

    mutating func next() -> Float {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        return Float(state >> 40) / Float(1 << 24) * 2 - 1
    }

    mutating func values(_ n: Int, scale: Float) -> [Float] { (0..<n).map { _ in next() * scale } }
}
#endif

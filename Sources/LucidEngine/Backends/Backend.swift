/// Elementwise binary kernels. The op layer has already chosen the dtype: `a`, `b` and the
/// output share it, and `a`/`b` are broadcast views of the output's shape.
package enum BinaryKernel: Sendable { case add, sub, mul, div }



/// Reductions over a set of axes.
package enum ReduceKernel: Sendable { case sum, mean }

/// A scalar operand, kept in the widest form of its kind so that a float16 tensor plus 0.1
/// computes with float32 0.1, not a float16-rounded one.
struct Scalar: Sendable {
    var double: Double
    var int: Int64
    init(_ d: Double) { double = d; int = Int64(exactly: d.rounded(.towardZero)) ?? 0 }
    init(int i: Int64) { double = Double(i); int = i }
}

/// Hyper-parameters of one SGD update (PyTorch's `torch.optim.SGD`).
struct SGDHyper: Sendable {
    var lr: Float, momentum: Float, dampening: Float, weightDecay: Float
    var nesterov: Bool, maximize: Bool, firstStep: Bool
}

/// Hyper-parameters of one Adam/AdamW update at 1-based step `step`.
struct AdamHyper: Sendable {
    var lr: Float, beta1: Float, beta2: Float, eps: Float, weightDecay: Float
    var decoupled: Bool, maximize: Bool, step: Int
}

/// What a device's compute stream provides: memory, transfers, a synchronise point and
/// kernels. A backend implements kernels only; dtypes, broadcasting, AMP casts and errors are
/// decided by the op layer before a kernel is called.
///
/// Work may be queued lazily: kernels only need to have run by the time `synchronize()` or
/// `read(_:into:)` returns. A Metal backend encodes kernels into command buffers and commits
/// them at the synchronise point; the host backends run each kernel at once.
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

    func fill(_ out: TensorImpl, with value: Scalar)
    /// Strided copy with dtype conversion (`src` and `dst` have one shape).
    func copy(_ src: TensorImpl, into dst: TensorImpl)
    func binary(_ op: BinaryKernel, _ a: TensorImpl, _ b: TensorImpl, into out: TensorImpl)
    /// `a op s` (or `s op a` when `scalarFirst`).
    func binary(_ op: BinaryKernel, _ a: TensorImpl, scalar: Scalar, scalarFirst: Bool, into out: TensorImpl)
    func unary(_ op: UnaryKernel, _ a: TensorImpl, into out: TensorImpl)
    /// `gradIn = grad * d op(x)/dx`, given the forward input `x` and output `y` (all of one
    /// shape and floating dtype).
    func unaryBackward(_ op: UnaryKernel, x: TensorImpl, y: TensorImpl, grad: TensorImpl, into gradIn: TensorImpl)
    /// Reduces `a` over `axes` into `out`, which has `a`'s rank with those axes set to 1.
    /// Floating-point input accumulates in at least float32.
    func reduce(_ op: ReduceKernel, _ a: TensorImpl, axes: [Int], into out: TensorImpl)
    /// Batched `out[i] = a[i] @ b[i] (+ bias)`: `a` is [B, M, K], `b` is [B, K, N] (any
    /// strides), `bias` is [N] or nil and `out` is a contiguous [B, M, N]. All share a dtype;
    /// low-precision floats multiply in float32 and round once.
    func gemm(_ a: TensorImpl, _ b: TensorImpl, bias: TensorImpl?, into out: TensorImpl)
    /// One SGD update of a parameter: contiguous tensors of one shape and floating dtype,
    /// computed in float32. `momentum`/`newMomentum` are present when momentum is non-zero.
    func sgdStep(param: TensorImpl, grad: TensorImpl, momentum: TensorImpl?, hyper: SGDHyper,
                 newParam: TensorImpl, newMomentum: TensorImpl?)
    /// `out = grad * invScale` computed in float32; returns whether any result (or input) is
    /// infinite or NaN. `grad` and `out` are contiguous and share a floating dtype.
    func unscale(_ grad: TensorImpl, invScale: Float, into out: TensorImpl) -> Bool
    /// One Adam (or AdamW, `decoupled`) update, likewise.
    func adamStep(param: TensorImpl, grad: TensorImpl, m: TensorImpl, v: TensorImpl, hyper: AdamHyper,
                  newParam: TensorImpl, newM: TensorImpl, newV: TensorImpl)
}

/// The backend that serves each device, made once per process on first use.
enum Backends {
    static let cpu: any Backend = HostBackend(device: .cpu, name: "cpu")

    /// Whether Metal kernels serve "metal". They are not built yet, so the host fallback
    /// serves it on every platform and this is false.
    static let metalIsAvailable = false

    /// The GPU stream. The Metal kernels are not built yet, so every platform serves "metal"
    /// with the host fallback, which warns once and can be turned off.
    private static let metal: Result<any Backend, LucidError> = HostFallback.make()

    static func backend(for device: Device) throws -> any Backend {
        switch device {
        case .cpu: return cpu
        case .metal: return try metal.get()
        }
    }
}

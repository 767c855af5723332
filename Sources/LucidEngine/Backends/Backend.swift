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

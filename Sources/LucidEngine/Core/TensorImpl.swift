/// The engine's tensor: a strided view of a storage. Its geometry and autograd history never
/// change once made, so it can be shared between threads and between the Swift API and C
/// handles; its values change only through in-place writes into the storage (`InPlace`,
/// the optimizers), which bump the storage's version, and a leaf's accumulated gradient
/// (`grad`) changes under the autograd lock.
package final class TensorImpl: @unchecked Sendable {
    let storage: Storage
    package let shape: [Int]
    /// Strides in elements.
    package let strides: [Int]
    /// Offset of element 0 in elements.
    let offset: Int
    package let dtype: DType
    package let numel: Int
    /// Whether the elements lie in row-major order with no gaps (size-1 dimensions' strides
    /// aside): found once, as kernels and routes ask it of every operand.
    package let isContiguous: Bool
    /// Whether gradients flow to this tensor: a leaf the user marked, or an op result with
    /// such an input (recorded while grad mode was on).
    package let requiresGrad: Bool
    /// The op that produced this tensor in the backward graph (nil for leaves).
    package let gradFn: GradNode?
    /// A leaf's accumulated gradient; guarded by `Autograd.lock`.
    var gradStorage: TensorImpl?
    /// A leaf's gradient hooks (an op result's are its node's); guarded by `Hooks.lock`.
    var hooks: HookList?

    init(
        storage: Storage, shape: [Int], strides: [Int], offset: Int, dtype: DType, requiresGrad: Bool = false,
        gradFn: GradNode? = nil
    ) {
        self.gradFn = gradFn
        self.storage = storage
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype
        self.requiresGrad = requiresGrad
        var n = 1
        for s in shape { n = n &* s }
        self.numel = n
        var expected = 1, contiguous = true
        for i in stride(from: shape.count - 1, through: 0, by: -1) where shape[i] != 1 {
            if strides[i] != expected {
                contiguous = false
                break
            }
            expected &*= shape[i]
        }
        isContiguous = contiguous
    }

    package var device: Device { storage.device }
    /// The storage element where element 0 is (PyTorch's `storage_offset()`).
    package var storageOffset: Int { offset }
    /// Whether `other` is a tensor over the same storage (a view of this one, or this one of it).
    package func sharesStorage(with other: TensorImpl) -> Bool { storage === other.storage }
    /// Bytes of the storage this tensor keeps alive (a view's is its base's).
    package var storageBytes: Int { storage.buffer.byteCount }
    var backend: any Backend { storage.backend }
    package var ndim: Int { shape.count }

    /// Whether the strides are exactly `Shape.contiguousStrides(shape)` (size-1 dimensions
    /// included, which `isContiguous` ignores).
    var hasRowMajorStrides: Bool {
        var expected = 1
        for i in stride(from: shape.count - 1, through: 0, by: -1) {
            if strides[i] != expected { return false }
            expected &*= max(shape[i], 1)
        }
        return true
    }

    /// A view of the same storage with other geometry.
    func view(shape: [Int], strides: [Int], offset: Int? = nil) -> TensorImpl {
        TensorImpl(storage: storage, shape: shape, strides: strides, offset: offset ?? self.offset, dtype: dtype)
    }

    /// This tensor broadcast to `target` (stride 0 along stretched dimensions). The caller has
    /// checked that the shapes broadcast.
    func expanded(to target: [Int]) -> TensorImpl {
        if target == shape { return self }
        let lead = target.count - shape.count
        var newStrides = [Int](repeating: 0, count: target.count)
        for i in 0..<shape.count where shape[i] == target[i + lead] && shape[i] != 1 {
            newStrides[i + lead] = strides[i]
        }
        return view(shape: target, strides: newStrides)
    }

    /// A new contiguous, uninitialised tensor on the same backend.
    static func empty(_ shape: [Int], dtype: DType, on backend: any Backend) throws -> TensorImpl {
        try backend.device.check(dtype, op: "")
        let n = try Shape.numel(shape)
        let buffer = try backend.allocate(byteCount: n * dtype.itemSize)
        return TensorImpl(
            storage: Storage.make(buffer: buffer, backend: backend), shape: shape,
            strides: Shape.contiguousStrides(shape), offset: 0, dtype: dtype)
    }

    /// A new contiguous, uninitialised tensor of `shape` on `like`'s backend. When `like` is
    /// contiguous and of that shape, the new tensor shares its shape and strides arrays
    /// instead of making two (the commonest case of an elementwise result).
    static func empty(_ shape: [Int], dtype: DType, like: TensorImpl) throws -> TensorImpl {
        guard shape == like.shape, like.hasRowMajorStrides else { return try empty(shape, dtype: dtype, on: like.backend) }
        try like.device.check(dtype, op: "")
        let buffer = try like.backend.allocate(byteCount: like.numel * dtype.itemSize)
        return TensorImpl(
            storage: Storage.make(buffer: buffer, backend: like.backend), shape: like.shape,
            strides: like.strides, offset: 0, dtype: dtype)
    }

    /// Whether this tensor is a leaf of the graph (gradients accumulate in `grad`).
    package var isLeaf: Bool { gradFn == nil }

    /// The same values as an op result recorded in the graph.
    func tracked(by node: GradNode) -> TensorImpl {
        TensorImpl(
            storage: storage, shape: shape, strides: strides, offset: offset, dtype: dtype, requiresGrad: true,
            gradFn: node)
    }

    /// The same values without autograd, over an alias of the storage whose version counts only
    /// the writes made through it (PyTorch's `.data`: backward's checks do not see them).
    package func dataAlias() -> TensorImpl {
        TensorImpl(storage: storage.alias(), shape: shape, strides: strides, offset: offset, dtype: dtype)
    }

    package func withRequiresGrad(_ flag: Bool) -> TensorImpl {
        TensorImpl(storage: storage, shape: shape, strides: strides, offset: offset, dtype: dtype, requiresGrad: flag)
    }
}

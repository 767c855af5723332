/// The engine's tensor: a strided view of a storage. Immutable once made, so it can be
/// shared between threads and between the Swift API and C handles without locks.
package final class TensorImpl: @unchecked Sendable {
    let storage: Storage
    package let shape: [Int]
    /// Strides in elements.
    package let strides: [Int]
    /// Offset of element 0 in elements.
    let offset: Int
    package let dtype: DType
    package let numel: Int
    /// Recorded for the autograd engine; set at creation.
    package let requiresGrad: Bool

    init(storage: Storage, shape: [Int], strides: [Int], offset: Int, dtype: DType, requiresGrad: Bool = false) {
        self.storage = storage
        self.shape = shape
        self.strides = strides
        self.offset = offset
        self.dtype = dtype
        self.requiresGrad = requiresGrad
        var n = 1
        for s in shape { n = n &* s }
        self.numel = n
    }

    package var device: Device { storage.device }
    var backend: any Backend { storage.backend }
    package var ndim: Int { shape.count }

    package var isContiguous: Bool {
        var expected = 1
        for i in stride(from: shape.count - 1, through: 0, by: -1) where shape[i] != 1 {
            if strides[i] != expected { return false }
            expected &*= shape[i]
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
        let n = try Shape.numel(shape)
        let buffer = try backend.allocate(byteCount: n * dtype.itemSize)
        return TensorImpl(storage: Storage(buffer: buffer, backend: backend), shape: shape,
                          strides: Shape.contiguousStrides(shape), offset: 0, dtype: dtype)
    }

    package func withRequiresGrad(_ flag: Bool) -> TensorImpl {
        TensorImpl(storage: storage, shape: shape, strides: strides, offset: offset, dtype: dtype, requiresGrad: flag)
    }
}

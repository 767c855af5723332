import LucidEngine

/// What a tensor handle holds: the engine tensor it stands for now, and for a view the tensor
/// it views. Engine tensors never change their autograd history; a write that autograd records
/// gives the written tensor (or the base of the written view) a new one, here, in place, so
/// that every handle to it sees the write. A view whose base has a new history since the view
/// was made is made again from the base when next read, as PyTorch regenerates a view's
/// `grad_fn` (`InPlace.view`). Read and changed only under the table's lock.
final class TensorRef {
    private var impl: TensorImpl
    /// The tensor this one views (itself never a view); nil for a tensor of its own.
    let base: TensorRef?
    /// How many times a recorded write has given this tensor a new history.
    private(set) var history = 0
    /// `base.history` when `impl` was made.
    private var seen: Int

    init(_ impl: TensorImpl, viewing base: TensorRef? = nil) {
        self.impl = impl
        self.base = base
        seen = base?.history ?? 0
    }

    var current: TensorImpl {
        if let base, seen != base.history {
            impl = InPlace.view(impl, of: base.current)
            seen = base.history
        }
        return impl
    }

    /// A recorded write's result: this tensor's values and geometry with the write as history.
    func rewrite(_ written: TensorImpl) {
        impl = written
        history &+= 1
    }
}

/// The tensor handles lent across the ABI.
final class TensorTable: @unchecked Sendable {
    private let table = HandleTable<TensorRef>(kind: "tensor")

    /// The engine tensor behind `handle` now.
    @inline(__always)
    func get(_ handle: UInt32) throws -> TensorImpl { try table.with(handle) { $0.current } }

    /// A new handle for `t`, a tensor of its own.
    @inline(__always)
    func insert(_ t: TensorImpl) throws -> UInt32 { try table.insert(TensorRef(t)) }

    /// A new handle for `t`, which a view op made from the tensor behind `source`: a view of
    /// that tensor's base (or of that tensor) when it shares its storage.
    func insert(_ t: TensorImpl, madeFrom source: UInt32) throws -> UInt32 {
        let ref = try table.with(source) { s -> TensorRef in
            t.sharesStorage(with: s.current) ? TensorRef(t, viewing: s.base ?? s) : TensorRef(t)
        }
        return try table.insert(ref)
    }

    /// Runs an in-place write into the tensor behind `dst`. `write` gets that tensor and, when
    /// it is a view, its base's; a result it returns is the tensor the write recorded for
    /// autograd, which from now on stands for the base (or for dst). Returns whether there was
    /// one.
    func write(_ dst: UInt32, _ write: (TensorImpl, TensorImpl?) throws -> TensorImpl?) throws -> Bool {
        let (ref, t, base) = try table.with(dst) { r in (r.base ?? r, r.current, r.base?.current) }
        guard let written = try write(t, base) else { return false }
        table.locked { ref.rewrite(written) }
        return true
    }

    /// `handle` stands from now on for `t`, a tensor of its own; views made of the tensor it
    /// stood for keep that one.
    func replace(_ handle: UInt32, with t: TensorImpl) throws { try table.replace(handle, with: TensorRef(t)) }

    func remove(_ handle: UInt32) throws { try table.remove(handle) }
    func remove(_ handles: UnsafeBufferPointer<UInt32>) throws { try table.remove(handles) }
    var count: Int { table.count }
}

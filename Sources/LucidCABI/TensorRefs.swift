import LucidEngine

/// What a tensor handle holds: the engine tensor it stands for now. Engine tensors never change
/// their autograd history; a write that autograd records gives the written tensor (or the base
/// of the written view) a new one, here, in place, so that every handle to it sees the write.
/// A tensor that has views, or is one, is `tracked`: a view whose base has a new history since
/// the view was made is made again from the base when next read, as PyTorch regenerates a
/// view's `grad_fn` (`InPlace.view`). Every other tensor is held as it is, with nothing more
/// allocated for it.
enum TensorEntry {
    case tensor(TensorImpl)
    case tracked(TensorRef)

    /// The engine tensor now; a view made again is stored, and the tensor it replaces goes into
    /// `dropped`, to be released once the table's lock is (see `HandleTable.remove`).
    @inline(__always)
    func current(_ dropped: inout [TensorImpl]) -> TensorImpl {
        switch self {
        case .tensor(let t): return t
        case .tracked(let r): return r.current(&dropped)
        }
    }
}

/// A tracked tensor: its engine tensor and, for a view, the tensor it views. Read and changed
/// only under the table's lock.
final class TensorRef {
    private var impl: TensorImpl
    /// The tensor this one views (itself never a view); nil for a tensor of its own.
    let base: TensorRef?
    /// How many times a recorded write has given this tensor a new history.
    private var history = 0
    /// `base.history` when `impl` was made.
    private var seen: Int

    init(_ impl: TensorImpl, viewing base: TensorRef? = nil) {
        self.impl = impl
        self.base = base
        seen = base?.history ?? 0
    }

    func current(_ dropped: inout [TensorImpl]) -> TensorImpl {
        if let base, seen != base.history {
            dropped.append(impl)
            impl = InPlace.view(impl, of: base.current(&dropped))
            seen = base.history
        }
        return impl
    }

    /// A recorded write's result: this tensor's values and geometry with the write as history.
    /// Returns the tensor it replaces.
    func rewrite(_ written: TensorImpl) -> TensorImpl {
        defer { impl = written; history &+= 1 }
        return impl
    }
}

/// The tensor handles lent across the ABI. Nothing an engine tensor's release may run (a
/// custom function's context going back to Python) happens under the table's lock.
final class TensorTable: @unchecked Sendable {
    private let table = HandleTable<TensorEntry>(kind: "tensor")

    /// The engine tensor behind `handle` now.
    @inline(__always)
    func get(_ handle: UInt32) throws -> TensorImpl {
        var dropped: [TensorImpl] = []
        let t = try table.with(handle) { $0.current(&dropped) }
        withExtendedLifetime(dropped) {}
        return t
    }

    /// The engine tensors behind two handles, looked up under one acquisition of the lock (a
    /// binary op's operands).
    @inline(__always)
    func get(_ a: UInt32, _ b: UInt32) throws -> (TensorImpl, TensorImpl) {
        var dropped: [TensorImpl] = []
        let pair = try table.with(a, b) { ($0.current(&dropped), $1.current(&dropped)) }
        withExtendedLifetime(dropped) {}
        return pair
    }

    /// A new handle for `t`, a tensor of its own.
    @inline(__always)
    func insert(_ t: TensorImpl) throws -> UInt32 { try table.insert(.tensor(t)) }

    /// A new handle for `t`, which a view op made from the tensor behind `source`: a view of
    /// that tensor's base (or of that tensor, which becomes tracked) when it shares its storage.
    func insert(_ t: TensorImpl, madeFrom source: UInt32) throws -> UInt32 {
        var dropped: [TensorImpl] = []
        let entry = try table.update(source) { s -> TensorEntry in
            guard t.sharesStorage(with: s.current(&dropped)) else { return .tensor(t) }
            switch s {
            case .tensor(let impl):
                let root = TensorRef(impl)
                s = .tracked(root)
                return .tracked(TensorRef(t, viewing: root))
            case .tracked(let r):
                return .tracked(TensorRef(t, viewing: r.base ?? r))
            }
        }
        withExtendedLifetime(dropped) {}
        return try table.insert(entry)
    }

    /// Runs an in-place write into the tensor behind `dst`. `write` gets that tensor and, when
    /// it is a view, its base's; a result it returns is the tensor the write recorded for
    /// autograd, which from now on stands for the base (or for dst). Returns whether there was
    /// one.
    func write(_ dst: UInt32, _ write: (TensorImpl, TensorImpl?) throws -> TensorImpl?) throws -> Bool {
        var dropped: [TensorImpl] = []
        let (t, base) = try table.with(dst) { e -> (TensorImpl, TensorImpl?) in
            switch e {
            case .tensor(let t): return (t, nil)
            case .tracked(let r): return (r.current(&dropped), r.base?.current(&dropped))
            }
        }
        withExtendedLifetime(dropped) {}
        guard let written = try write(t, base) else { return false }
        let replaced = try table.update(dst) { e -> TensorImpl? in
            switch e {
            case .tensor(let old):
                e = .tensor(written)
                return old
            case .tracked(let r):
                return (r.base ?? r).rewrite(written)
            }
        }
        withExtendedLifetime(replaced) {}
        return true
    }

    /// `handle` stands from now on for `t`, a tensor of its own; views made of the tensor it
    /// stood for keep that one.
    func replace(_ handle: UInt32, with t: TensorImpl) throws { try table.replace(handle, with: .tensor(t)) }

    func remove(_ handle: UInt32) throws { try table.remove(handle) }
    func remove(_ handles: UnsafeBufferPointer<UInt32>) throws { try table.remove(handles) }
    var count: Int { table.count }
}

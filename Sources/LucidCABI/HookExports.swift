import LucidEngine

// Gradient hooks and the autograd calls that take several tensors (torch.autograd.grad and
// torch.autograd.backward) through the C ABI. A hook is the caller's context, called through
// the one callback the caller registered.

/// The caller's hook: (context, a new handle the callee owns to the gradient, or to the leaf for
/// a post-accumulate hook, out: a replacement gradient's handle or 0) -> 0, or non-zero when it
/// failed.
public typealias LucidHookCall = @convention(c) (UInt64, UInt32, UnsafeMutablePointer<UInt32>?) -> Int32
/// Called once when the engine no longer holds a hook's context.
public typealias LucidHookRelease = @convention(c) (UInt64) -> Void

private let hookLock = Lock()
nonisolated(unsafe) private var hookCall: LucidHookCall?
nonisolated(unsafe) private var hookRelease: LucidHookRelease?

/// Tells the caller when the engine drops a hook's context: held by the hook's closure.
private final class HookContext: @unchecked Sendable {
    let id: UInt64
    init(_ id: UInt64) { self.id = id }
    deinit { hookLock.withLock { hookRelease }?(id) }
}

@_cdecl("lucid_hook_callbacks")
public func lucid_hook_callbacks(_ call: LucidHookCall?, _ release: LucidHookRelease?) -> Int32 {
    abiCall {
        guard let call, let release else { throw LucidError(.value, "hook call and release callbacks are required") }
        hookLock.withLock {
            hookCall = call
            hookRelease = release
        }
    }
}

/// Calls the caller's hook with a new handle to `value`; the handle it answers, if any.
private func callHook(_ call: LucidHookCall, _ token: HookContext, _ value: TensorImpl, _ what: String) throws -> TensorImpl? {
    let handle = try tensors.insert(value)
    var replacement: UInt32 = 0
    guard call(token.id, handle, &replacement) == 0 else {
        throw LucidError(.runtime, "a \(what) registered on a tensor raised an exception")
    }
    return replacement == 0 ? nil : try tensors.get(replacement)
}

@_cdecl("lucid_tensor_register_hook")
public func lucid_tensor_register_hook(
    _ t: UInt32, _ kind: Int32, _ context: UInt64,
    _ key: UnsafeMutablePointer<UInt64>?
) -> Int32 {
    abiCall {
        guard let key else { throw LucidError(.value, "key pointer is null") }
        let hookKind = try decode(kind, as: HookKind.self, "hook kind")
        let x = try tensors.get(t)
        guard let call = hookLock.withLock({ hookCall }) else {
            throw LucidError(.runtime, "no hook callback is registered (lucid_hook_callbacks)")
        }
        let token = HookContext(context)
        switch hookKind {
        case .grad:
            key.pointee = try Hooks.register(x) { g in try callHook(call, token, g, "hook") }
        case .postAccumulate:
            key.pointee = try Hooks.registerPostAccumulate(x) { leaf in
                _ = try callHook(call, token, leaf, "post accumulate grad hook")
            }
        }
    }
}

@_cdecl("lucid_hook_remove")
public func lucid_hook_remove(_ key: UInt64, _ removed: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Hooks.remove(key) ? 1 : 0, removed, "removed") }
}

@_cdecl("lucid_tensor_retain_grad")
public func lucid_tensor_retain_grad(_ t: UInt32) -> Int32 {
    abiCall { try Hooks.retainGrad(try tensors.get(t)) }
}

@_cdecl("lucid_tensor_retains_grad")
public func lucid_tensor_retains_grad(_ t: UInt32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(Hooks.retainsGrad(try tensors.get(t)) ? 1 : 0, out) }
}

/// `count` tensors from a C array (0 entries as nil where `optional`).
private func tensorArray(_ p: UnsafePointer<UInt32>?, _ count: Int32, _ what: String) throws -> [UInt32] {
    guard count >= 0 else { throw LucidError(.value, "\(what): negative count \(count)") }
    if count == 0 { return [] }
    guard let p else { throw LucidError(.value, "\(what) pointer is null") }
    return (0..<Int(count)).map { p[$0] }
}

@_cdecl("lucid_autograd_backward")
public func lucid_autograd_backward(
    _ roots: UnsafePointer<UInt32>?, _ grads: UnsafePointer<UInt32>?, _ count: Int32,
    _ inputs: UnsafePointer<UInt32>?, _ inputCount: Int32, _ retainGraph: Int32
) -> Int32 {
    abiCall {
        let r = try tensorArray(roots, count, "tensors").map { try tensors.get($0) }
        let g = try tensorArray(grads, count, "grad_tensors").map { $0 == 0 ? nil : try tensors.get($0) }
        let i = try tensorArray(inputs, inputCount, "inputs").map { try tensors.get($0) }
        try Autograd.backward(r, grads: g, retainGraph: retainGraph != 0, inputs: inputCount == 0 ? nil : i)
    }
}

@_cdecl("lucid_autograd_grad")
public func lucid_autograd_grad(
    _ outputs: UnsafePointer<UInt32>?, _ gradOutputs: UnsafePointer<UInt32>?, _ count: Int32,
    _ inputs: UnsafePointer<UInt32>?, _ inputCount: Int32, _ retainGraph: Int32,
    _ allowUnused: Int32, _ grads: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let o = try tensorArray(outputs, count, "outputs").map { try tensors.get($0) }
        let go = try tensorArray(gradOutputs, count, "grad_outputs").map { $0 == 0 ? nil : try tensors.get($0) }
        let i = try tensorArray(inputs, inputCount, "inputs").map { try tensors.get($0) }
        guard let grads else { throw LucidError(.value, "grads pointer is null") }
        let found = try Autograd.gradients(of: o, go, wrt: i, retainGraph: retainGraph != 0, allowUnused: allowUnused != 0)
        // Handles are written only once all are made, so a failure leaves none to release.
        var made: [UInt32] = []
        do {
            for g in found { made.append(try g.map { try tensors.insert($0) } ?? 0) }
        } catch {
            for h in made where h != 0 { try? tensors.remove(h) }
            throw error
        }
        for (k, h) in made.enumerated() { grads[k] = h }
    }
}

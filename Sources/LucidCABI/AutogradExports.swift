#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LucidEngine

// Autograd through the C ABI. The graph lives in the engine; a handle's tensor knows its
// grad_fn, and a leaf holds its accumulated gradient.

@_cdecl("lucid_backward")
public func lucid_backward(_ t: UInt32, _ grad: UInt32, _ retainGraph: Int32) -> Int32 {
    abiCall {
        try Autograd.backward(try tensors.get(t), grad: grad == 0 ? nil : try tensors.get(grad), retainGraph: retainGraph != 0)
    }
}

@_cdecl("lucid_tensor_grad")
public func lucid_tensor_grad(_ t: UInt32, _ out: UnsafeMutablePointer<UInt32>?) -> Int32 {
    abiCall {
        let g = Autograd.grad(of: try tensors.get(t))
        guard let out else { throw LucidError(.value, "out pointer is null") }
        out.pointee = try g.map { try tensors.insert($0) } ?? 0
    }
}

@_cdecl("lucid_tensor_set_grad")
public func lucid_tensor_set_grad(_ t: UInt32, _ grad: UInt32) -> Int32 {
    abiCall { try Autograd.setGrad(of: try tensors.get(t), to: grad == 0 ? nil : try tensors.get(grad)) }
}

/// Node names as C strings that live as long as the process, interned on first use.
private let nodeNameLock = Lock()
nonisolated(unsafe) private var nodeNames: [String: UnsafeMutablePointer<CChar>] = [:]

@_cdecl("lucid_tensor_grad_fn")
public func lucid_tensor_grad_fn(_ t: UInt32, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    abiCall {
        guard let name else { throw LucidError(.value, "name pointer is null") }
        guard let node = try tensors.get(t).gradFn else {
            name.pointee = nil
            return
        }
        name.pointee = try UnsafePointer(
            nodeNameLock.withLock { () -> UnsafeMutablePointer<CChar> in
                if let p = nodeNames[node.name] { return p }
                guard let p = strdup(node.name) else { throw LucidError(.runtime, "out of memory") }
                nodeNames[node.name] = p
                return p
            })
    }
}

@_cdecl("lucid_set_grad_enabled")
public func lucid_set_grad_enabled(_ enabled: Int32, _ previous: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall {
        let was = GradMode.set(enabled != 0)
        previous?.pointee = was ? 1 : 0
    }
}

@_cdecl("lucid_is_grad_enabled")
public func lucid_is_grad_enabled(_ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(GradMode.isEnabled ? 1 : 0, out) }
}

// ---- custom functions (lucid.autograd.Function) ------------------------------------------------

/// The caller's backward: (context, the output's gradient as a new handle the callee owns,
/// out: one gradient handle per input, 0 for none, count) -> 0, or non-zero when it failed.
public typealias LucidCustomBackward = @convention(c) (UInt64, UInt32, UnsafeMutablePointer<UInt32>?, Int32) -> Int32
/// Called once when the engine no longer needs a context (its graph node is gone).
public typealias LucidCustomRelease = @convention(c) (UInt64) -> Void

private let customLock = Lock()
nonisolated(unsafe) private var customBackward: LucidCustomBackward?
nonisolated(unsafe) private var customRelease: LucidCustomRelease?

/// Tells the caller when a context is no longer needed: held by the graph node's rule.
private final class CustomContext: @unchecked Sendable {
    let id: UInt64
    init(_ id: UInt64) { self.id = id }
    deinit { customLock.withLock { customRelease }?(id) }
}

@_cdecl("lucid_custom_function_callbacks")
public func lucid_custom_function_callbacks(_ backward: LucidCustomBackward?, _ release: LucidCustomRelease?) -> Int32 {
    abiCall {
        guard let backward, let release else { throw LucidError(.value, "backward and release callbacks are required") }
        customLock.withLock {
            customBackward = backward
            customRelease = release
        }
    }
}

@_cdecl("lucid_custom_function_record")
public func lucid_custom_function_record(
    _ name: UnsafePointer<CChar>?, _ inputs: UnsafePointer<UInt32>?, _ count: Int32,
    _ output: UInt32, _ context: UInt64,
    _ out: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        guard let name, let out else { throw LucidError(.value, "name or out pointer is null") }
        guard count >= 0 else { throw LucidError(.value, "count is negative (\(count))") }
        guard count == 0 || inputs != nil else { throw LucidError(.value, "inputs pointer is null") }
        guard let backward = customLock.withLock({ customBackward }) else {
            throw LucidError(.runtime, "no backward callback is registered (lucid_custom_function_callbacks)")
        }
        let ins = try (0..<Int(count)).map { try tensors.get(inputs![$0]) }
        let token = CustomContext(context)
        let n = Int(count)
        let recorded = try CustomFunctions.record(output: try tensors.get(output), inputs: ins, name: String(cString: name)) { g in
            var handles = [UInt32](repeating: 0, count: n)
            let gradHandle = try tensors.insert(g)
            let status = handles.withUnsafeMutableBufferPointer { backward(token.id, gradHandle, $0.baseAddress, Int32(n)) }
            guard status == 0 else {
                throw LucidError(.runtime, "the backward of \(String(cString: name)) raised an exception")
            }
            return try handles.map { $0 == 0 ? nil : try tensors.get($0) }
        }
        out.pointee = try tensors.insert(recorded)
    }
}

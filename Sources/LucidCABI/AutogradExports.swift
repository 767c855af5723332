#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import LucidEngine

// Autograd through the C ABI. The graph lives in the engine; a handle's tensor knows its
// grad_fn, and a leaf holds its accumulated gradient.

@_cdecl("lucid_backward")
public func lucid_backward(_ t: UInt64, _ grad: UInt64, _ retainGraph: Int32) -> Int32 {
    abiCall {
        try Autograd.backward(try tensors.get(t), grad: grad == 0 ? nil : try tensors.get(grad), retainGraph: retainGraph != 0)
    }
}

@_cdecl("lucid_tensor_grad")
public func lucid_tensor_grad(_ t: UInt64, _ out: UnsafeMutablePointer<UInt64>?) -> Int32 {
    abiCall {
        let g = Autograd.grad(of: try tensors.get(t))
        guard let out else { throw LucidError(.value, "out pointer is null") }
        out.pointee = g.map { tensors.insert($0) } ?? 0
    }
}

@_cdecl("lucid_tensor_set_grad")
public func lucid_tensor_set_grad(_ t: UInt64, _ grad: UInt64) -> Int32 {
    abiCall { try Autograd.setGrad(of: try tensors.get(t), to: grad == 0 ? nil : try tensors.get(grad)) }
}

/// Node names as C strings that live as long as the process, interned on first use.
private let nodeNameLock = Lock()
nonisolated(unsafe) private var nodeNames: [String: UnsafeMutablePointer<CChar>] = [:]

@_cdecl("lucid_tensor_grad_fn")
public func lucid_tensor_grad_fn(_ t: UInt64, _ name: UnsafeMutablePointer<UnsafePointer<CChar>?>?) -> Int32 {
    abiCall {
        guard let name else { throw LucidError(.value, "name pointer is null") }
        guard let node = try tensors.get(t).gradFn else {
            name.pointee = nil
            return
        }
        name.pointee = try UnsafePointer(nodeNameLock.withLock { () -> UnsafeMutablePointer<CChar> in
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

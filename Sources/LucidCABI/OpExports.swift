import LucidEngine

// One entry point per op family. Inputs are borrowed; the result is a new handle.

@_cdecl("lucid_binary")
public func lucid_binary(_ op: Int32, _ a: UInt32, _ b: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let k = try decode(op, as: BinaryKernel.self, "binary op"), (x, y) = try tensors.get(a, b)
        try emit(try Elementwise.binary(k, x, y), out)
    }
}

@_cdecl("lucid_binary_scalar")
public func lucid_binary_scalar(
    _ op: Int32, _ a: UInt32, _ value: Double, _ intValue: Int64, _ kind: Int32, _ scalarFirst: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Elementwise.binary(
                try decode(op, as: BinaryKernel.self, "binary op"), try tensors.get(a), scalar: try scalarOperand(value, intValue, kind),
                scalarFirst: scalarFirst != 0), out)
    }
}

@_cdecl("lucid_unary")
public func lucid_unary(_ op: Int32, _ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emit(try Elementwise.unary(try decode(op, as: UnaryKernel.self, "unary op"), try tensors.get(a)), out)
    }
}

@_cdecl("lucid_binary_inplace")
public func lucid_binary_inplace(
    _ op: Int32, _ dst: UInt32, _ other: UInt32, _ alpha: Double,
    _ name: UnsafePointer<CChar>?
) -> Int32 {
    abiCall {
        try InPlace.binary(
            try decode(op, as: BinaryKernel.self, "binary op"), try tensors.get(dst), try tensors.get(other), alpha: alpha,
            op: name.map { String(cString: $0) } ?? "binary_")
    }
}

@_cdecl("lucid_binary_scalar_inplace")
public func lucid_binary_scalar_inplace(
    _ op: Int32, _ dst: UInt32, _ value: Double, _ intValue: Int64, _ kind: Int32,
    _ name: UnsafePointer<CChar>?
) -> Int32 {
    abiCall {
        try InPlace.binary(
            try decode(op, as: BinaryKernel.self, "binary op"), try tensors.get(dst), scalar: try scalarOperand(value, intValue, kind),
            op: name.map { String(cString: $0) } ?? "binary_")
    }
}

@_cdecl("lucid_unary_inplace")
public func lucid_unary_inplace(_ op: Int32, _ dst: UInt32, _ name: UnsafePointer<CChar>?) -> Int32 {
    abiCall {
        try InPlace.unary(
            try decode(op, as: UnaryKernel.self, "unary op"), try tensors.get(dst),
            op: name.map { String(cString: $0) } ?? "unary_")
    }
}

@_cdecl("lucid_bitwise_not")
public func lucid_bitwise_not(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Elementwise.bitwiseNot(try tensors.get(a)), out) }
}

@_cdecl("lucid_matmul")
public func lucid_matmul(_ a: UInt32, _ b: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let (x, y) = try tensors.get(a, b)
        try emit(try LinearAlgebra.matmul(x, y), out)
    }
}

@_cdecl("lucid_linear")
public func lucid_linear(_ x: UInt32, _ w: UInt32, _ b: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emit(try LinearAlgebra.linear(try tensors.get(x), try tensors.get(w), b == 0 ? nil : try tensors.get(b)), out)
    }
}

@_cdecl("lucid_reduce")
public func lucid_reduce(
    _ op: Int32, _ a: UInt32, _ dims: UnsafePointer<Int64>?, _ ndims: Int32, _ keepdim: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let reduce = try decode(op, as: ReduceOp.self, "reduce op")
        let d: [Int]? = ndims < 0 ? nil : try intArray(dims, ndims, "dims")
        let x = try tensors.get(a), keep = keepdim != 0
        switch reduce {
        case .sum: try emit(try Reductions.reduce(.sum, x, dims: d, keepdim: keep), out)
        case .mean: try emit(try Reductions.reduce(.mean, x, dims: d, keepdim: keep), out)
        case .amax: try emit(try Reductions.extreme(x, dims: d, keepdim: keep, largest: true), out)
        case .amin: try emit(try Reductions.extreme(x, dims: d, keepdim: keep, largest: false), out)
        case .logsumexp: try emit(try Reductions.logsumexp(x, dims: d, keepdim: keep), out)
        }
    }
}

@_cdecl("lucid_reshape")
public func lucid_reshape(
    _ a: UInt32, _ shape: UnsafePointer<Int64>?, _ ndim: Int32, _ viewOnly: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let s = try intArray(shape, ndim, "shape"), x = try tensors.get(a)
        try emitView(viewOnly != 0 ? try ShapeOps.view(x, s) : try ShapeOps.reshape(x, s), of: a, out)
    }
}

@_cdecl("lucid_transpose")
public func lucid_transpose(_ a: UInt32, _ d0: Int64, _ d1: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.transpose(try tensors.get(a), Int(clamping: d0), Int(clamping: d1)), of: a, out) }
}

@_cdecl("lucid_permute")
public func lucid_permute(_ a: UInt32, _ dims: UnsafePointer<Int64>?, _ ndim: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.permute(try tensors.get(a), try intArray(dims, ndim, "dims")), of: a, out) }
}

@_cdecl("lucid_contiguous")
public func lucid_contiguous(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try Ops.contiguous(try tensors.get(a)), of: a, out) }
}

@_cdecl("lucid_detach")
public func lucid_detach(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try tensors.get(a).withRequiresGrad(false), out) }
}

@_cdecl("lucid_data")
public func lucid_data(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try tensors.get(a).dataAlias(), out) }
}

@_cdecl("lucid_clone")
public func lucid_clone(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Ops.clone(try tensors.get(a)), out) }
}

@_cdecl("lucid_assign")
public func lucid_assign(
    _ dst: UInt32, _ value: UInt32, _ flags: Int32, _ op: UnsafePointer<CChar>?,
    _ recorded: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let name = op.map { String(cString: $0) } ?? "copy_"
        let f = try decodeFlags(flags, as: AssignFlag.self, "assign flag")
        let v = try tensors.get(value)
        let wrote = try tensors.write(dst) { t, base in
            try InPlace.assign(
                t, v, base: base, op: name, fill: f.contains(.fill), sameKind: f.contains(.sameKind),
                result: f.contains(.result))
        }
        recorded?.pointee = wrote ? 1 : 0
    }
}

@_cdecl("lucid_fill")
public func lucid_fill(
    _ dst: UInt32, _ value: Double, _ intValue: Int64, _ kind: Int32, _ op: UnsafePointer<CChar>?,
    _ recorded: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let scalar = try scalarOperand(value, intValue, kind), name = op.map { String(cString: $0) } ?? "fill_"
        let wrote = try tensors.write(dst) { t, base in try InPlace.fill(t, scalar, base: base, op: name) }
        recorded?.pointee = wrote ? 1 : 0
    }
}

@_cdecl("lucid_set_data")
public func lucid_set_data(_ t: UInt32, _ value: UInt32) -> Int32 {
    abiCall {
        let x = try tensors.get(t), v = try tensors.get(value)
        let keep = x.requiresGrad && x.isLeaf
        if keep && !v.dtype.isFloatingPoint {
            throw LucidError(.type, ".data: a tensor that requires grad needs floating-point data, got \(v.dtype)")
        }
        let data = v.withRequiresGrad(keep)
        if keep, let g = Autograd.grad(of: x), g.shape == data.shape, g.dtype == data.dtype, g.device == data.device {
            try Autograd.setGrad(of: data, to: g)
        }
        if keep { Hooks.transfer(from: x, to: data) }
        try tensors.replace(t, with: data)
    }
}

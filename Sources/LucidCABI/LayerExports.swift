import LucidEngine

// Comparisons, selection, reductions with indices, shape ops, indexing, layers and losses.
// Inputs are borrowed; results are new handles. A tensor handle of 0 means "absent" where a
// parameter is optional.

/// Several results at once: every out-pointer is checked before any handle is made, so a
/// null pointer leaks nothing.
func emit(_ results: [(TensorImpl?, UnsafeMutablePointer<UInt32>?)]) throws {
    for (t, p) in results where t != nil && p == nil { throw LucidError(.value, "out pointer is null") }
    for (t, p) in results { p?.pointee = try t.map { try tensors.insert($0) } ?? 0 }
}

func optionalTensor(_ h: UInt32) throws -> TensorImpl? { h == 0 ? nil : try tensors.get(h) }

/// `count` Int64 parameters from a C array (null only when count is 0).
func params(_ p: UnsafePointer<Int64>?, _ count: Int, _ what: String) throws -> [Int] {
    try intArray(p, Int32(count), what)
}

@_cdecl("lucid_compare")
public func lucid_compare(_ op: Int32, _ a: UInt32, _ b: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let k = try decode(op, as: CompareKernel.self, "comparison"), (x, y) = try tensors.get(a, b)
        try emit(try Comparison.compare(k, x, y), out)
    }
}

@_cdecl("lucid_compare_scalar")
public func lucid_compare_scalar(
    _ op: Int32, _ a: UInt32, _ value: Double, _ intValue: Int64, _ kind: Int32,
    _ scalarFirst: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Comparison.compare(
                try decode(op, as: CompareKernel.self, "comparison"), try tensors.get(a), scalar: try scalarOperand(value, intValue, kind),
                scalarFirst: scalarFirst != 0), out)
    }
}

@_cdecl("lucid_where")
public func lucid_where(
    _ cond: UInt32, _ a: UInt32, _ b: UInt32, _ aValue: Double, _ aInt: Int64, _ aKind: Int32,
    _ bValue: Double, _ bInt: Int64, _ bKind: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let c = try tensors.get(cond)
        let result: TensorImpl
        switch (try optionalTensor(a), try optionalTensor(b)) {
        case let (x?, y?): result = try Comparison.where(c, x, y)
        case let (x?, nil): result = try Comparison.where(c, scalar: try scalarOperand(bValue, bInt, bKind), x, scalarSecond: true)
        case let (nil, y?): result = try Comparison.where(c, scalar: try scalarOperand(aValue, aInt, aKind), y)
        case (nil, nil):
            result = try Comparison.where(c, scalar: try scalarOperand(aValue, aInt, aKind), scalar: try scalarOperand(bValue, bInt, bKind))
        }
        try emit(result, out)
    }
}

@_cdecl("lucid_clamp")
public func lucid_clamp(
    _ a: UInt32, _ hasMin: Int32, _ minValue: Double, _ minInt: Int64, _ minKind: Int32,
    _ hasMax: Int32, _ maxValue: Double, _ maxInt: Int64, _ maxKind: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let lo = hasMin != 0 ? try scalarOperand(minValue, minInt, minKind) : nil
        let hi = hasMax != 0 ? try scalarOperand(maxValue, maxInt, maxKind) : nil
        try emit(try Comparison.clamp(try tensors.get(a), min: lo, max: hi), out)
    }
}

@_cdecl("lucid_var")
public func lucid_var(
    _ a: UInt32, _ dims: UnsafePointer<Int64>?, _ ndims: Int32, _ correction: Double, _ keepdim: Int32,
    _ root: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let d: [Int]? = ndims < 0 ? nil : try intArray(dims, ndims, "dims")
        try emit(try Reductions.variance(try tensors.get(a), dims: d, correction: correction, keepdim: keepdim != 0, root: root != 0), out)
    }
}

@_cdecl("lucid_max_dim")
public func lucid_max_dim(
    _ a: UInt32, _ dim: Int64, _ keepdim: Int32, _ largest: Int32,
    _ values: UnsafeMutablePointer<UInt32>?, _ indices: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (v, i) = try Reductions.extremeWithIndices(try tensors.get(a), dim: Int(clamping: dim), keepdim: keepdim != 0, largest: largest != 0)
        try emit([(v, values), (i, indices)])
    }
}

@_cdecl("lucid_argmax")
public func lucid_argmax(
    _ a: UInt32, _ dim: Int64, _ hasDim: Int32, _ keepdim: Int32, _ largest: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Reductions.argExtreme(
                try tensors.get(a), dim: hasDim != 0 ? Int(clamping: dim) : nil, keepdim: keepdim != 0,
                largest: largest != 0), out)
    }
}

// ---- shape -------------------------------------------------------------------------------

@_cdecl("lucid_squeeze")
public func lucid_squeeze(_ a: UInt32, _ dims: UnsafePointer<Int64>?, _ ndims: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.squeeze(try tensors.get(a), dims: ndims < 0 ? nil : try intArray(dims, ndims, "dims")), of: a, out) }
}

@_cdecl("lucid_unsqueeze")
public func lucid_unsqueeze(_ a: UInt32, _ dim: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.unsqueeze(try tensors.get(a), Int(clamping: dim)), of: a, out) }
}

@_cdecl("lucid_expand")
public func lucid_expand(_ a: UInt32, _ shape: UnsafePointer<Int64>?, _ ndim: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.expand(try tensors.get(a), try intArray(shape, ndim, "shape")), of: a, out) }
}

@_cdecl("lucid_flatten")
public func lucid_flatten(_ a: UInt32, _ start: Int64, _ end: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emitView(try ShapeOps.flatten(try tensors.get(a), start: Int(clamping: start), end: Int(clamping: end)), of: a, out) }
}

@_cdecl("lucid_diagonal")
public func lucid_diagonal(_ a: UInt32, _ offset: Int64, _ dim1: Int64, _ dim2: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emitView(
            try ShapeOps.diagonal(
                try tensors.get(a), offset: Int(clamping: offset), dim1: Int(clamping: dim1),
                dim2: Int(clamping: dim2)), of: a, out)
    }
}

@_cdecl("lucid_as_strided")
public func lucid_as_strided(
    _ a: UInt32, _ size: UnsafePointer<Int64>?, _ stride: UnsafePointer<Int64>?, _ ndim: Int32,
    _ offset: Int64, _ hasOffset: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let sizes = try intArray(size, ndim, "size"), strides = try intArray(stride, ndim, "stride")
        try emitView(
            try ShapeOps.asStrided(
                try tensors.get(a), size: sizes, stride: strides,
                offset: hasOffset != 0 ? Int(clamping: offset) : nil), of: a, out)
    }
}

@_cdecl("lucid_storage_offset")
public func lucid_storage_offset(_ a: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try store(Int64(try tensors.get(a).storageOffset), out) }
}

@_cdecl("lucid_is_contiguous")
public func lucid_is_contiguous(_ a: UInt32, _ out: UnsafeMutablePointer<Int32>?) -> Int32 {
    abiCall { try store(try tensors.get(a).isContiguous ? 1 : 0, out) }
}

@_cdecl("lucid_wrap_dim")
public func lucid_wrap_dim(_ dim: Int64, _ ndim: Int32, _ op: UnsafePointer<CChar>?, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        guard ndim >= 0 else { throw LucidError(.value, "wrap_dim: negative ndim \(ndim)") }
        let name = op.map { String(cString: $0) } ?? "dim"
        try store(Int64(try Shape.wrapDim(Int(clamping: dim), ndim: Int(ndim), op: name)), out)
    }
}

@_cdecl("lucid_narrow")
public func lucid_narrow(_ a: UInt32, _ dim: Int64, _ start: Int64, _ length: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emitView(
            try ShapeOps.narrow(try tensors.get(a), dim: Int(clamping: dim), start: Int(clamping: start), length: Int(clamping: length)), of: a, out)
    }
}

func tensorList(_ handles: UnsafePointer<UInt32>?, _ count: Int32) throws -> [TensorImpl] {
    guard count >= 0 else { throw LucidError(.value, "tensors: negative count \(count)") }
    if count == 0 { return [] }
    guard let handles else { throw LucidError(.value, "tensors pointer is null") }
    return try (0..<Int(count)).map { try tensors.get(handles[$0]) }
}

/// cat (`stack` 0) or stack (`stack` 1) of `count` tensors along `dim`.
@_cdecl("lucid_cat")
public func lucid_cat(
    _ handles: UnsafePointer<UInt32>?, _ count: Int32, _ dim: Int64, _ stack: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let ts = try tensorList(handles, count)
        try emit(stack != 0 ? try ShapeOps.stack(ts, dim: Int(clamping: dim)) : try ShapeOps.cat(ts, dim: Int(clamping: dim)), out)
    }
}

/// Splits along `dim`: mode 0 into `sizes`, 1 into pieces of `sizes[0]`, 2 into `sizes[0]`
/// chunks. Writes up to `capacity` handles to `outs` and their number to `count`.
@_cdecl("lucid_split")
public func lucid_split(
    _ a: UInt32, _ mode: Int32, _ sizes: UnsafePointer<Int64>?, _ nsizes: Int32, _ dim: Int64,
    _ outs: UnsafeMutablePointer<UInt32>?, _ capacity: Int32, _ count: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let x = try tensors.get(a), d = Int(clamping: dim)
        let s = try intArray(sizes, nsizes, "sizes")
        let pieces: [TensorImpl]
        switch try decode(mode, as: SplitMode.self, "split mode") {
        case .sizes: pieces = try ShapeOps.split(x, sizes: s, dim: d)
        case .size:
            guard let n = s.first else { throw LucidError(.value, "split: missing split size") }
            pieces = try ShapeOps.split(x, size: n, dim: d)
        case .chunks:
            guard let n = s.first else { throw LucidError(.value, "split: missing chunk count") }
            pieces = try ShapeOps.chunk(x, chunks: n, dim: d)
        }
        guard let outs, let count else { throw LucidError(.value, "split: output pointers are null") }
        guard pieces.count <= Int(capacity) else {
            throw LucidError(.value, "split: \(pieces.count) pieces do not fit in the \(capacity) output slots")
        }
        for (i, p) in pieces.enumerated() { outs[i] = try tensors.insert(p, madeFrom: a) }
        count.pointee = Int32(pieces.count)
    }
}

// ---- indexing ------------------------------------------------------------------------------

/// Decodes the subscript items of `lucid_index` and `lucid_index_put`.
private func subscriptItems(
    _ kinds: UnsafePointer<Int32>?, _ values: UnsafePointer<Int64>?, _ flags: UnsafePointer<Int32>?,
    _ handles: UnsafePointer<UInt32>?, _ count: Int32, op: String
) throws -> [Indexing.Item] {
    guard count >= 0, count <= 64 else { throw LucidError(.index, "\(op): \(count) items are more than the 64 supported") }
    var items: [Indexing.Item] = []
    guard count > 0 else { return items }
    guard let kinds, let values, let flags, let handles else { throw LucidError(.value, "\(op): null item arrays") }
    for i in 0..<Int(count) {
        let v = (0..<3).map { Int(clamping: values[3 * i + $0]) }
        switch try decode(kinds[i], as: IndexKind.self, "item kind") {
        case .int: items.append(.int(v[0]))
        case .slice:
            let f = flags[i]
            items.append(.slice(start: f & 1 != 0 ? v[0] : nil, stop: f & 2 != 0 ? v[1] : nil, step: f & 4 != 0 ? v[2] : nil))
        case .none: items.append(.newAxis)
        case .ellipsis: items.append(.ellipsis)
        case .tensor: items.append(.tensor(try tensors.get(handles[i])))
        }
    }
    return items
}

/// `a[items]`: per item a kind (0 int, 1 slice, 2 None, 3 Ellipsis, 4 tensor), three int64
/// values (the int; or start, stop, step), presence flags for a slice's start/stop/step
/// (bits 0, 1, 2), and a tensor handle.
@_cdecl("lucid_index")
public func lucid_index(
    _ a: UInt32, _ kinds: UnsafePointer<Int32>?, _ values: UnsafePointer<Int64>?,
    _ flags: UnsafePointer<Int32>?, _ handles: UnsafePointer<UInt32>?, _ count: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let items = try subscriptItems(kinds, values, flags, handles, count, op: "index")
        try emitView(try Indexing.subscripted(try tensors.get(a), items), of: a, out)
    }
}

/// A new tensor: `a` with `src` written (or added, with `accumulate`) at `a[items]`; items as
/// for `lucid_index`.
@_cdecl("lucid_index_put")
public func lucid_index_put(
    _ a: UInt32, _ kinds: UnsafePointer<Int32>?, _ values: UnsafePointer<Int64>?,
    _ flags: UnsafePointer<Int32>?, _ handles: UnsafePointer<UInt32>?, _ count: Int32,
    _ src: UInt32, _ accumulate: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let items = try subscriptItems(kinds, values, flags, handles, count, op: "index_put")
        try emit(try Indexing.assign(try tensors.get(a), items, try tensors.get(src), accumulate: accumulate != 0), out)
    }
}

@_cdecl("lucid_index_put_inplace")
public func lucid_index_put_inplace(
    _ dst: UInt32, _ kinds: UnsafePointer<Int32>?, _ values: UnsafePointer<Int64>?,
    _ flags: UnsafePointer<Int32>?, _ handles: UnsafePointer<UInt32>?, _ count: Int32,
    _ src: UInt32, _ accumulate: Int32, _ op: UnsafePointer<CChar>?,
    _ recorded: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let name = op.map { String(cString: $0) } ?? "index_put_"
        let items = try subscriptItems(kinds, values, flags, handles, count, op: name)
        let v = try tensors.get(src)
        let wrote = try tensors.write(dst) { t, base in
            try InPlace.indexPut(t, items, v, accumulate: accumulate != 0, base: base, op: name)
        }
        recorded?.pointee = wrote ? 1 : 0
    }
}

@_cdecl("lucid_set_element")
public func lucid_set_element(
    _ dst: UInt32, _ count: Int32, _ i0: Int64, _ i1: Int64, _ i2: Int64, _ i3: Int64,
    _ value: Double, _ intValue: Int64, _ kind: Int32
) -> Int32 {
    abiCall {
        guard (0...4).contains(count) else { throw LucidError(.value, "set_element: count \(count) is outside 0...4") }
        let index = (Int(clamping: i0), Int(clamping: i1), Int(clamping: i2), Int(clamping: i3))
        try withUnsafeBytes(of: index) { raw in
            try InPlace.setElement(
                try tensors.get(dst),
                UnsafeBufferPointer(
                    start: raw.baseAddress?.assumingMemoryBound(to: Int.self),
                    count: Int(count)),
                try scalarOperand(value, intValue, kind), op: "__setitem__")
        }
    }
}

@_cdecl("lucid_write_at")
public func lucid_write_at(
    _ dst: UInt32, _ kinds: UnsafePointer<Int32>?, _ values: UnsafePointer<Int64>?,
    _ flags: UnsafePointer<Int32>?, _ handles: UnsafePointer<UInt32>?, _ count: Int32,
    _ src: UInt32, _ value: Double, _ intValue: Int64, _ kind: Int32,
    _ op: UnsafePointer<CChar>?, _ recorded: UnsafeMutablePointer<Int32>?
) -> Int32 {
    abiCall {
        let name = op.map { String(cString: $0) } ?? "__setitem__"
        let items = try subscriptItems(kinds, values, flags, handles, count, op: name)
        let v = src == 0 ? nil : try tensors.get(src)
        let scalar = src == 0 ? try scalarOperand(value, intValue, kind) : ScalarOperand(int: 0)
        let wrote = try tensors.write(dst) { t, base in
            try InPlace.write(t, at: items, value: v, scalar: scalar, base: base ?? t, op: name)
        }
        recorded?.pointee = wrote ? 1 : 0
    }
}

@_cdecl("lucid_gather")
public func lucid_gather(_ a: UInt32, _ dim: Int64, _ index: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Indexing.gather(try tensors.get(a), dim: Int(clamping: dim), index: try tensors.get(index)), out) }
}

@_cdecl("lucid_index_select")
public func lucid_index_select(_ a: UInt32, _ dim: Int64, _ index: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Indexing.indexSelect(try tensors.get(a), dim: Int(clamping: dim), index: try tensors.get(index)), out) }
}

@_cdecl("lucid_embedding")
public func lucid_embedding(
    _ weight: UInt32, _ indices: UInt32, _ hasPadding: Int32, _ paddingIndex: Int64,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Indexing.embedding(
                try tensors.get(weight), try tensors.get(indices),
                paddingIndex: hasPadding != 0 ? Int(clamping: paddingIndex) : nil), out)
    }
}

// ---- layers --------------------------------------------------------------------------------

@_cdecl("lucid_softmax")
public func lucid_softmax(_ a: UInt32, _ dim: Int64, _ log: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let x = try tensors.get(a), d = Int(clamping: dim)
        try emit(log != 0 ? try Activations.logSoftmax(x, dim: d) : try Activations.softmax(x, dim: d), out)
    }
}

@_cdecl("lucid_leaky_relu")
public func lucid_leaky_relu(_ a: UInt32, _ slope: Double, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Activations.leakyRelu(try tensors.get(a), slope: slope), out) }
}

@_cdecl("lucid_lstm_cell")
public func lucid_lstm_cell(
    _ xw: UInt32, _ hw: UInt32, _ c: UInt32, _ h: UnsafeMutablePointer<Int64>?,
    _ cNew: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let (hOut, cOut) = try Recurrent.lstmCell(try tensors.get(xw), try tensors.get(hw), try tensors.get(c))
        guard h != nil, cNew != nil else { throw LucidError(.value, "lstm_cell: output pointers are null") }
        try emit(hOut, h)
        try emit(cOut, cNew)
    }
}

@_cdecl("lucid_lstm_layer")
public func lucid_lstm_layer(
    _ x: UInt32, _ h0: UInt32, _ c0: UInt32, _ wIh: UInt32, _ wHh: UInt32, _ bIh: UInt32,
    _ bHh: UInt32, _ reverse: Int32, _ out: UnsafeMutablePointer<Int64>?,
    _ hN: UnsafeMutablePointer<Int64>?, _ cN: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard out != nil, hN != nil, cN != nil else { throw LucidError(.value, "lstm_layer: output pointers are null") }
        let (o, h, c) = try Recurrent.lstmLayer(
            try tensors.get(x), h0: try tensors.get(h0), c0: try tensors.get(c0),
            wIh: try tensors.get(wIh), wHh: try tensors.get(wHh),
            bIh: try optionalTensor(bIh), bHh: try optionalTensor(bHh),
            reverse: reverse != 0)
        try emit(o, out)
        try emit(h, hN)
        try emit(c, cN)
    }
}

@_cdecl("lucid_gru_cell")
public func lucid_gru_cell(_ xw: UInt32, _ hw: UInt32, _ h: UInt32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Recurrent.gruCell(try tensors.get(xw), try tensors.get(hw), try tensors.get(h)), out) }
}

@_cdecl("lucid_gru_layer")
public func lucid_gru_layer(
    _ x: UInt32, _ h0: UInt32, _ wIh: UInt32, _ wHh: UInt32, _ bIh: UInt32, _ bHh: UInt32, _ reverse: Int32,
    _ out: UnsafeMutablePointer<Int64>?, _ hN: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard out != nil, hN != nil else { throw LucidError(.value, "gru_layer: output pointers are null") }
        let (o, h) = try Recurrent.gruLayer(
            try tensors.get(x), h0: try tensors.get(h0), wIh: try tensors.get(wIh), wHh: try tensors.get(wHh),
            bIh: try optionalTensor(bIh), bHh: try optionalTensor(bHh), reverse: reverse != 0)
        try emit(o, out)
        try emit(h, hN)
    }
}

@_cdecl("lucid_rnn_layer")
public func lucid_rnn_layer(
    _ x: UInt32, _ h0: UInt32, _ wIh: UInt32, _ wHh: UInt32, _ bIh: UInt32, _ bHh: UInt32, _ relu: Int32,
    _ reverse: Int32, _ out: UnsafeMutablePointer<Int64>?, _ hN: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        guard out != nil, hN != nil else { throw LucidError(.value, "rnn_layer: output pointers are null") }
        let (o, h) = try Recurrent.rnnLayer(
            try tensors.get(x), h0: try tensors.get(h0), wIh: try tensors.get(wIh), wHh: try tensors.get(wHh),
            bIh: try optionalTensor(bIh), bHh: try optionalTensor(bHh), relu: relu != 0, reverse: reverse != 0)
        try emit(o, out)
        try emit(h, hN)
    }
}

@_cdecl("lucid_dropout")
public func lucid_dropout(_ a: UInt32, _ p: Double, _ training: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall { try emit(try Activations.dropout(try tensors.get(a), p: p, training: training != 0), out) }
}

@_cdecl("lucid_layer_norm")
public func lucid_layer_norm(
    _ a: UInt32, _ shape: UnsafePointer<Int64>?, _ ndim: Int32, _ weight: UInt32, _ bias: UInt32,
    _ eps: Double, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Normalization.layerNorm(
                try tensors.get(a), normalizedShape: try intArray(shape, ndim, "normalized_shape"),
                weight: try optionalTensor(weight), bias: try optionalTensor(bias), eps: eps), out)
    }
}

@_cdecl("lucid_group_norm")
public func lucid_group_norm(
    _ a: UInt32, _ groups: Int64, _ weight: UInt32, _ bias: UInt32, _ eps: Double,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Normalization.groupNorm(
                try tensors.get(a), groups: Int(clamping: groups), weight: try optionalTensor(weight),
                bias: try optionalTensor(bias), eps: eps), out)
    }
}

/// Writes the normalised output and, in training with running statistics, their updated
/// values (0 otherwise).
@_cdecl("lucid_batch_norm")
public func lucid_batch_norm(
    _ a: UInt32, _ runningMean: UInt32, _ runningVar: UInt32, _ weight: UInt32, _ bias: UInt32,
    _ training: Int32, _ momentum: Double, _ eps: Double, _ out: UnsafeMutablePointer<UInt32>?,
    _ newMean: UnsafeMutablePointer<UInt32>?, _ newVar: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (y, m, v) = try Normalization.batchNorm(
            try tensors.get(a), runningMean: try optionalTensor(runningMean),
            runningVar: try optionalTensor(runningVar), weight: try optionalTensor(weight),
            bias: try optionalTensor(bias), training: training != 0, momentum: momentum, eps: eps)
        try emit([(y, out), (m, newMean), (v, newVar)])
    }
}

/// params: stride h, w; padding h, w; dilation h, w; groups.
@_cdecl("lucid_conv2d")
public func lucid_conv2d(_ x: UInt32, _ w: UInt32, _ b: UInt32, _ p: UnsafePointer<Int64>?, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let q = try params(p, 7, "conv2d params")
        try emit(
            try Convolution.conv2d(
                try tensors.get(x), try tensors.get(w), try optionalTensor(b), stride: (q[0], q[1]),
                padding: (q[2], q[3]), dilation: (q[4], q[5]), groups: q[6]), out)
    }
}

/// params: stride, padding, dilation, groups.
@_cdecl("lucid_conv1d")
public func lucid_conv1d(_ x: UInt32, _ w: UInt32, _ b: UInt32, _ p: UnsafePointer<Int64>?, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let q = try params(p, 4, "conv1d params")
        try emit(
            try Convolution.conv1d(
                try tensors.get(x), try tensors.get(w), try optionalTensor(b), stride: q[0], padding: q[1],
                dilation: q[2], groups: q[3]), out)
    }
}

/// params: stride h, w; padding h, w; output padding h, w; dilation h, w; groups.
@_cdecl("lucid_conv_transpose2d")
public func lucid_conv_transpose2d(
    _ x: UInt32, _ w: UInt32, _ b: UInt32, _ p: UnsafePointer<Int64>?,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let q = try params(p, 9, "conv_transpose2d params")
        try emit(
            try Convolution.convTranspose2d(
                try tensors.get(x), try tensors.get(w), try optionalTensor(b), stride: (q[0], q[1]),
                padding: (q[2], q[3]), outputPadding: (q[4], q[5]), dilation: (q[6], q[7]),
                groups: q[8]), out)
    }
}

/// params: kernel h, w; stride h, w; padding h, w; dilation h, w.
@_cdecl("lucid_max_pool2d")
public func lucid_max_pool2d(_ x: UInt32, _ p: UnsafePointer<Int64>?, _ ceilMode: Int32, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        let q = try params(p, 8, "max_pool2d params")
        try emit(
            try Convolution.maxPool2d(
                try tensors.get(x), kernel: (q[0], q[1]), stride: (q[2], q[3]), padding: (q[4], q[5]),
                dilation: (q[6], q[7]), ceilMode: ceilMode != 0), out)
    }
}

/// params: kernel h, w; stride h, w; padding h, w. A divisor of 0 means none.
@_cdecl("lucid_avg_pool2d")
public func lucid_avg_pool2d(
    _ x: UInt32, _ p: UnsafePointer<Int64>?, _ ceilMode: Int32, _ countIncludePad: Int32,
    _ divisor: Int64, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let q = try params(p, 6, "avg_pool2d params")
        try emit(
            try Convolution.avgPool2d(
                try tensors.get(x), kernel: (q[0], q[1]), stride: (q[2], q[3]), padding: (q[4], q[5]),
                ceilMode: ceilMode != 0, countIncludePad: countIncludePad != 0,
                divisorOverride: divisor == 0 ? nil : Int(clamping: divisor)), out)
    }
}

@_cdecl("lucid_adaptive_avg_pool2d")
public func lucid_adaptive_avg_pool2d(_ x: UInt32, _ oh: Int64, _ ow: Int64, _ out: UnsafeMutablePointer<Int64>?) -> Int32 {
    abiCall {
        try emit(try Convolution.adaptiveAvgPool2d(try tensors.get(x), outputSize: (Int(clamping: oh), Int(clamping: ow))), out)
    }
}

/// Writes the attention output and, when `weights` is non-null, the attention weights.
@_cdecl("lucid_attention")
public func lucid_attention(
    _ q: UInt32, _ k: UInt32, _ v: UInt32, _ mask: UInt32, _ causal: Int32, _ hasScale: Int32,
    _ scale: Double, _ dropout: Double, _ out: UnsafeMutablePointer<UInt32>?,
    _ weights: UnsafeMutablePointer<UInt32>?
) -> Int32 {
    abiCall {
        let (o, w) = try Attention.attention(
            try tensors.get(q), try tensors.get(k), try tensors.get(v), mask: try optionalTensor(mask),
            causal: causal != 0, scale: hasScale != 0 ? scale : nil, dropout: dropout,
            needWeights: weights != nil)
        try emit([(o, out), (weights == nil ? nil : w, weights)])
    }
}

// ---- losses --------------------------------------------------------------------------------

/// mse_loss or l1_loss, as `kind` (a LUCID_LOSS_* code) says.
@_cdecl("lucid_pointwise_loss")
public func lucid_pointwise_loss(
    _ kind: Int32, _ input: UInt32, _ target: UInt32, _ reduction: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        let loss = try decode(kind, as: PointwiseLossKind.self, "pointwise loss kind")
        let x = try tensors.get(input), y = try tensors.get(target), r = try decode(reduction, as: Losses.Reduction.self, "reduction")
        switch loss {
        case .mse: try emit(try Losses.mse(x, y, reduction: r), out)
        case .l1: try emit(try Losses.l1(x, y, reduction: r), out)
        }
    }
}

@_cdecl("lucid_nll_loss")
public func lucid_nll_loss(
    _ input: UInt32, _ target: UInt32, _ weight: UInt32, _ ignoreIndex: Int64, _ reduction: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Losses.nll(
                try tensors.get(input), try tensors.get(target), weight: try optionalTensor(weight),
                ignoreIndex: Int(clamping: ignoreIndex), reduction: try decode(reduction, as: Losses.Reduction.self, "reduction")), out)
    }
}

@_cdecl("lucid_cross_entropy")
public func lucid_cross_entropy(
    _ input: UInt32, _ target: UInt32, _ weight: UInt32, _ ignoreIndex: Int64, _ reduction: Int32,
    _ labelSmoothing: Double, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Losses.crossEntropy(
                try tensors.get(input), try tensors.get(target), weight: try optionalTensor(weight),
                ignoreIndex: Int(clamping: ignoreIndex), reduction: try decode(reduction, as: Losses.Reduction.self, "reduction"),
                labelSmoothing: labelSmoothing), out)
    }
}

@_cdecl("lucid_binary_cross_entropy")
public func lucid_binary_cross_entropy(
    _ input: UInt32, _ target: UInt32, _ weight: UInt32, _ reduction: Int32, _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Losses.binaryCrossEntropy(
                try tensors.get(input), try tensors.get(target), weight: try optionalTensor(weight),
                reduction: try decode(reduction, as: Losses.Reduction.self, "reduction")), out)
    }
}

@_cdecl("lucid_bce_with_logits")
public func lucid_bce_with_logits(
    _ input: UInt32, _ target: UInt32, _ weight: UInt32, _ posWeight: UInt32, _ reduction: Int32,
    _ out: UnsafeMutablePointer<Int64>?
) -> Int32 {
    abiCall {
        try emit(
            try Losses.bceWithLogits(
                try tensors.get(input), try tensors.get(target), weight: try optionalTensor(weight),
                posWeight: try optionalTensor(posWeight), reduction: try decode(reduction, as: Losses.Reduction.self, "reduction")), out)
    }
}

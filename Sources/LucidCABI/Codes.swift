// The header's enums that have no engine counterpart: codes only the C ABI speaks. Each raw
// value is the header's (tests/test_abi_header.py checks them), and a caller's code is read
// with `decode` (ABISupport.swift). The other enums are the engine's: DType, Device,
// LucidError.Kind, CastPolicy, PrecisionVerdict, UnaryKernel, BinaryKernel, CompareKernel,
// Losses.Reduction, ScalarOperand.Kind and Linalg.QRMode.

/// `enum lucid_record_field`: where an op's record keeps each thing it says of its result
/// (see `Record`). `dims` is how many sizes and strides it has room for, `len` its length.
enum RecordField: Int32, CaseIterable {
    case handle = 0, dtype = 1, device = 2, ndim = 3, requiresGrad = 4, storageBytes = 5, shape = 6
    case dims = 8, strides = 14, shapeKey = 22, len = 23

    /// The raw value as an index into the record.
    var index: Int { Int(rawValue) }
}

/// `enum lucid_reduce_op`: lucid_reduce's reductions.
enum ReduceOp: Int32, CaseIterable {
    case sum = 0, mean = 1, amax = 2, amin = 3, logsumexp = 4
}

/// `enum lucid_index_kind`: what one subscript item of lucid_index and lucid_index_put is.
enum IndexKind: Int32, CaseIterable {
    case int = 0, slice = 1, none = 2, ellipsis = 3, tensor = 4
}

/// `enum lucid_assign_flag`: the bits of lucid_assign's flags.
enum AssignFlag: Int32, CaseIterable {
    /// One value written everywhere (fill_).
    case fill = 1
    /// The value's dtype must not be of a higher kind than the destination's.
    case sameKind = 2
    /// The value is the in-place op's own result.
    case result = 4
}

/// `enum lucid_split_mode`: how lucid_split reads its sizes.
enum SplitMode: Int32, CaseIterable {
    /// Into pieces of the given sizes.
    case sizes = 0
    /// Into pieces of sizes[0] (the last one smaller).
    case size = 1
    /// Into sizes[0] chunks.
    case chunks = 2
}

/// `enum lucid_pointwise_loss_kind`: lucid_pointwise_loss's losses.
enum PointwiseLossKind: Int32, CaseIterable {
    case mse = 0, l1 = 1
}

/// `enum lucid_hook_kind`: when a hook registered by lucid_tensor_register_hook is called.
enum HookKind: Int32, CaseIterable {
    /// With the tensor's gradient, each time backward computes it.
    case grad = 0
    /// With a leaf, once its gradient is accumulated into grad.
    case postAccumulate = 1
}

/// Shorthands for the composite ops (softmax, norms, convolution, attention, losses), which
/// are written in terms of the primitive ops so that their backward comes from the graph.
enum Composite {
    static func add(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try Elementwise.binary(.add, a, b) }
    static func sub(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try Elementwise.binary(.sub, a, b) }
    static func mul(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try Elementwise.binary(.mul, a, b) }
    static func div(_ a: TensorImpl, _ b: TensorImpl) throws -> TensorImpl { try Elementwise.binary(.div, a, b) }
    static func mul(_ a: TensorImpl, _ s: Double) throws -> TensorImpl {
        try Elementwise.binary(.mul, a, scalar: ScalarOperand(float: s), scalarFirst: false)
    }
    static func add(_ a: TensorImpl, _ s: Double) throws -> TensorImpl {
        try Elementwise.binary(.add, a, scalar: ScalarOperand(float: s), scalarFirst: false)
    }
    static func sum(_ a: TensorImpl, _ dims: [Int]?, keepdim: Bool = false) throws -> TensorImpl {
        try Reductions.reduce(.sum, a, dims: dims, keepdim: keepdim)
    }
    static func mean(_ a: TensorImpl, _ dims: [Int]?, keepdim: Bool = false) throws -> TensorImpl {
        try Reductions.reduce(.mean, a, dims: dims, keepdim: keepdim)
    }
    static func zeroLike(_ t: TensorImpl) throws -> TensorImpl {
        try Ops.scalarTensor(ScalarOperand(int: 0), dtype: t.dtype, device: t.device)
    }

    /// The widest dtype of `ts` (not empty), whatever their order: bfloat16 with float32 is
    /// float32.
    static func widestType(_ ts: [TensorImpl]) -> DType {
        ts.dropFirst().reduce(ts[0].dtype) { DType.promote($0, $1.dtype) }
    }

    static func checkFloat(_ op: String, _ ts: [TensorImpl]) throws {
        for t in ts where !t.dtype.isFloatingPoint {
            throw LucidError.type("\(op): expected floating-point tensors, got \(t.dtype)")
        }
    }

    static func checkSameDType(_ op: String, _ ts: [TensorImpl]) throws {
        try checkFloat(op, ts)
        if let f = ts.first, let other = ts.first(where: { $0.dtype != f.dtype }) {
            throw LucidError.type(
                "\(op): expected tensors of one dtype, got \(f.dtype) and \(other.dtype) (convert one with .to(), or run under autocast)")
        }
    }
}

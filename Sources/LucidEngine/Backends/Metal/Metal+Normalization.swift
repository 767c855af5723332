#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Row normalisation on the GPU (Kernels/Normalization.metal): a threadgroup per row,
/// compensated float32 sums, one rounding. The other normalisations are composed.
extension MetalBackend: NormalizationKernels {
    func normalizationRoute(_ call: KernelCall) -> KernelRoute {
        guard case .normalizeRows = call.op else { return .compose }
        return .native
    }

    func normalizeRows(
        _ x: TensorImpl, rows: Int, eps: Float, weight: TensorImpl?, bias: TensorImpl?, affine: RowAffine,
        into out: TensorImpl, mean: TensorImpl, rstd: TensorImpl
    ) {
        guard rows > 0, x.numel > 0 else { return }
        let n = x.numel / rows
        let kernel = out.dtype == x.dtype ? x.dtype.name : "\(x.dtype.name)_\(out.dtype.name)"
        encode("normalize_rows_\(kernel)", groups: rows, width: Self.rowWidth(n), floatsPerThread: 2) { e in
            bind(x, 0, e)
            bind(weight ?? mean, 1, e)  // read only when has_weight is set
            bind(bias ?? mean, 2, e)
            bind(out, 3, e)
            bind(mean, 4, e)
            bind(rstd, 5, e)
            // RowsShape: long n, has_weight, has_bias, groups, span; float eps, pad.
            var words = [Int64(n), weight == nil ? 0 : 1, bias == nil ? 0 : 1, Int64(affine.groups), Int64(affine.span)]
            words.append(Int64(eps.bitPattern))
            setBytes(words, 6, e)
        }
    }
}
#endif

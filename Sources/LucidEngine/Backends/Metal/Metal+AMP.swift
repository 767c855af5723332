#if canImport(Metal) && !LUCID_NO_METAL
import Metal

/// Automatic mixed precision on the GPU (Kernels/AMP.metal): GradScaler's unscale and scale
/// update, with the host kernels' float32 formulas, and autocast inspection's statistics.
/// Flags, scales and counts stay on the device: nothing here waits. An unexpected dtype or
/// layout of a gradient is routed to the host (counted).
extension MetalBackend: AMPKernels {
    func ampRoute(_ call: KernelCall) -> KernelRoute {
        switch call.op {
        case .unscale(let count):
            let pairs = zip(call.reads.prefix(count), call.writes.prefix(count)).filter { $0.0.numel > 0 }
            return pairs.allSatisfy({ Self.floatingContiguous([$0.0, $0.1]) }) ? .native : .host
        default:
            return .native
        }
    }

    func castStatistics(_ x: TensorImpl, into acc: TensorImpl, word: Int) {
        guard x.numel > 0 else { return }
        // CastStatsParams: 8 uints and 1 ulong = 40 bytes.
        var words = CastStatistics.limits(for: x.dtype)
        words += [x.dtype == .float16 ? 1 : x.dtype == .bfloat16 ? 2 : 0, UInt32(word), 0]
        words += [UInt32(truncatingIfNeeded: x.numel), UInt32(truncatingIfNeeded: x.numel >> 32)]
        // A threadgroup per 4096 values, at most 256: each thread loops over its share.
        let groups = max(1, min((x.numel + 4095) / 4096, 256))
        encode("cast_stats_\(x.dtype.name)", groups: groups, width: 256, floatsPerThread: 7) { e in
            bind(x, 0, e)
            bind(acc, 1, e)
            setBytes(words, 2, e)
        }
    }

    func unscale(_ grads: [TensorImpl], invScale: TensorImpl, found: TensorImpl, into outs: [TensorImpl]) {
        let pairs = zip(grads, outs).filter { $0.0.numel > 0 }
        for (grad, out) in pairs {
            encode("unscale_\(grad.dtype.name)", count: grad.numel) { e in
                bind(grad, 0, e)
                bind(out, 1, e)
                bind(found, 2, e)
                bind(invScale, 3, e)
                setBytes(UInt64(grad.numel), 4, e)
            }
        }
    }

    func updateScale(_ scale: TensorImpl, growthTracker: TensorImpl, found: TensorImpl, _ u: ScaleUpdate) {
        // ScaleUpdateParams: 2 floats and 1 int.
        let words = [u.growthFactor.bitPattern, u.backoffFactor.bitPattern, UInt32(bitPattern: u.growthInterval)]
        encode("amp_update_scale", count: 1) { e in
            bind(scale, 0, e)
            bind(growthTracker, 1, e)
            bind(found, 2, e)
            setBytes(words, 3, e)
        }
    }
}
#endif

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Host max pooling and its adjoint, threaded over planes; average pooling of undilated
/// float32 windows.
extension HostBackend: PoolingKernels, AveragePoolingKernels {
    func maxPool2d(_ x: TensorImpl, _ g: WindowGeometry, values: TensorImpl, indices: TensorImpl) {
        dispatch(x.dtype, MaxPool(x: x, g: g, values: values, indices: indices))
    }

    func maxPool2dBackward(_ grad: TensorImpl, indices: TensorImpl, _ g: WindowGeometry, into gradIn: TensorImpl) {
        dispatch(gradIn.dtype, MaxPoolBackward(grad: grad, indices: indices, g: g, gradIn: gradIn))
    }

    func avgPool2d(_ x: TensorImpl, _ g: WindowGeometry, divisors: TensorImpl, into out: TensorImpl) {
        let px = UnsafePointer(hostPointer(x, F32Element.self)), po = hostPointer(out, F32Element.self)
        let pd = UnsafePointer(hostPointer(divisors, F32Element.self))
        let planes = x.numel / max(1, g.input.0 * g.input.1)
        HostThreads.forEachRange(planes, grain: planeGrain(g), align: 1) { range in
            for p in range { averagePlane(g, px + p * g.input.0 * g.input.1, pd, po + p * g.output.0 * g.output.1) }
        }
    }

    func avgPool2dBackward(_ grad: TensorImpl, _ g: WindowGeometry, divisors: TensorImpl, into gradIn: TensorImpl) {
        let pg = UnsafePointer(hostPointer(grad, F32Element.self)), po = hostPointer(gradIn, F32Element.self)
        let pd = UnsafePointer(hostPointer(divisors, F32Element.self))
        let planes = gradIn.numel / max(1, g.input.0 * g.input.1)
        HostThreads.forEachRange(planes, grain: planeGrain(g), align: 1) { range in
            for p in range {
                spreadPlane(g, pg + p * g.output.0 * g.output.1, pd, po + p * g.input.0 * g.input.1)
            }
        }
    }
}

/// Visits each window of one plane: its output position `o` (row-major), the offset of its
/// top-left corner in the input plane (`top·w + left`, before padding is clipped) and its
/// in-bounds rows and columns relative to that corner.
@inline(__always)
private func forEachWindow(
    _ g: WindowGeometry,
    _ body: (
        _ o: Int, _ corner: Int, _ rows: Range<Int>,
        _ columns: Range<Int>
    ) -> Void
) {
    let (h, w) = g.input, (oh, ow) = g.output
    for i in 0..<oh {
        let top = i * g.stride.0 - g.padding.0
        let (r0, r1) = taps(top, g.kernel.0, 1, h)
        for j in 0..<ow {
            let left = j * g.stride.1 - g.padding.1
            let (c0, c1) = taps(left, g.kernel.1, 1, w)
            body(i * ow + j, top * w + left, r0..<r1, c0..<c1)
        }
    }
}

/// One plane's window averages.
private func averagePlane(
    _ g: WindowGeometry, _ x: UnsafePointer<Float>, _ divisors: UnsafePointer<Float>,
    _ out: UnsafeMutablePointer<Float>
) {
    let w = g.input.1
    forEachWindow(g) { o, corner, rows, columns in
        var sum: Float = 0
        for r in rows {
            let row = x + corner + r * w
            for c in columns { sum += row[c] }
        }
        out[o] = sum / divisors[o]
    }
}

/// One plane's adjoint: zero the input gradient, then add grad / divisor over each window.
private func spreadPlane(
    _ g: WindowGeometry, _ grad: UnsafePointer<Float>, _ divisors: UnsafePointer<Float>,
    _ gradIn: UnsafeMutablePointer<Float>
) {
    let w = g.input.1
    gradIn.update(repeating: 0, count: g.input.0 * w)
    forEachWindow(g) { o, corner, rows, columns in
        let share = grad[o] / divisors[o]
        for r in rows {
            let row = gradIn + corner + r * w
            for c in columns { row[c] += share }
        }
    }
}

/// The kernel taps `i0..<i1` of a window starting at `start` (dilation `d`) that fall
/// inside `0..<size`.
@inline(__always)
private func taps(_ start: Int, _ k: Int, _ d: Int, _ size: Int) -> (Int, Int) {
    if d == 1 {  // no divisions in the common case
        let first = max(0, -start)
        return (first, max(first, min(k, size &- start)))
    }
    let first = start >= 0 ? 0 : (-start + d - 1) / d
    let last = start >= size ? 0 : min(k, (size - start + d - 1) / d)
    return (first, max(first, last))
}

/// Planes at a time per thread: enough window work to repay a thread.
private func planeGrain(_ g: WindowGeometry) -> Int {
    max(1, HostThreads.grain / max(1, g.output.0 * g.output.1 * g.kernel.0 * g.kernel.1))
}

private struct MaxPool: ElementVisitor {
    let x: TensorImpl, g: WindowGeometry, values: TensorImpl, indices: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(HostBackend.address(x).assumingMemoryBound(to: E.Stored.self))
        let pv = HostBackend.address(values).assumingMemoryBound(to: E.Stored.self)
        let pi = HostBackend.address(indices).assumingMemoryBound(to: Int64.self)
        let g = g
        // 2x2 windows at stride 2 inside the plane (MaxPool2d(2)), the commonest case: unrolled.
        let halving =
            g.kernel == (2, 2) && g.stride == (2, 2) && g.padding == (0, 0) && g.dilation == (1, 1)
            && 2 * g.output.0 <= g.input.0 && 2 * g.output.1 <= g.input.1  // (ceil_mode's last window can overhang)
        HostThreads.forEachRange(x.shape[0], grain: planeGrain(g), align: 1) { planes in
            for p in planes {
                if halving { Self.pool2x2(E.self, g, px, pv, pi, plane: p) } else { Self.pool(E.self, g, px, pv, pi, plane: p) }
            }
        }
    }

    /// `best`/`at` after the candidate `v` at `q`: a larger value or the first NaN takes over
    /// (selects, not jumps), in the same order as `pool`'s loops.
    @inline(__always)
    private static func step<R: HostReal>(_ best: inout R, _ at: inout Int, _ v: R, _ q: Int) {
        // v > best, or v is NaN and best is not: "not v <= best" while best is a number. Both
        // comparisons are evaluated (no short circuit), so the compiler keeps this branch-free.
        let take = (v <= best ? 0 : 1) & (best == best ? 1 : 0)
        let mask = 0 &- take
        if R.self == Float.self {
            let b = unsafeBitCast(best, to: Float.self), x = unsafeBitCast(v, to: Float.self)
            let m = UInt32(truncatingIfNeeded: mask)
            best = unsafeBitCast(Float(bitPattern: (x.bitPattern & m) | (b.bitPattern & ~m)), to: R.self)
        } else if take != 0 {
            best = v
        }
        at = (q & mask) | (at & ~mask)
    }

    private static func pool2x2<E: HostElement>(
        _: E.Type, _ g: WindowGeometry, _ px: UnsafePointer<E.Stored>,
        _ pv: UnsafeMutablePointer<E.Stored>, _ pi: UnsafeMutablePointer<Int64>,
        plane p: Int
    ) {
        let (h, w) = g.input, (oh, ow) = g.output
        let plane = px + p &* h &* w
        var k = p &* oh &* ow
        for oy in 0..<oh {
            let row = 2 &* oy &* w
            for ox in 0..<ow {
                let q = row &+ 2 &* ox
                var best = E.float(plane, q), at = q
                step(&best, &at, E.float(plane, q &+ 1), q &+ 1)
                step(&best, &at, E.float(plane, q &+ w), q &+ w)
                step(&best, &at, E.float(plane, q &+ w &+ 1), q &+ w &+ 1)
                E.setFloat(pv, k, best)
                pi[k] = Int64(at)
                k &+= 1
            }
        }
    }

    /// One plane. A function of its own, so that the geometry stays in registers rather than
    /// being reloaded from a closure context after every store.
    private static func pool<E: HostElement>(
        _: E.Type, _ g: WindowGeometry, _ px: UnsafePointer<E.Stored>,
        _ pv: UnsafeMutablePointer<E.Stored>, _ pi: UnsafeMutablePointer<Int64>,
        plane p: Int
    ) {
        let (h, w) = g.input, (oh, ow) = g.output
        let (kh, kw) = g.kernel, (sh, sw) = g.stride, (ph, pw) = g.padding, (dh, dw) = g.dilation
        let plane = px + p &* h &* w
        var k = p &* oh &* ow
        for oy in 0..<oh {
            let y0 = oy &* sh &- ph
            let (i0, i1) = taps(y0, kh, dh, h)
            for ox in 0..<ow {
                let x0 = ox &* sw &- pw
                let (j0, j1) = taps(x0, kw, dw, w)
                // Start from the first tap inside the plane; the rest replace it branch-free
                // (selects, not jumps: which tap wins is data, and mispredicts).
                var at = i0 < i1 && j0 < j1 ? (y0 &+ i0 &* dh) &* w &+ x0 &+ j0 &* dw : -1
                var best = at >= 0 ? E.float(plane, at) : -E.Real.infinity
                for i in i0..<i1 {
                    let row = (y0 &+ i &* dh) &* w &+ x0
                    for j in j0..<j1 {
                        let q = row &+ j &* dw
                        step(&best, &at, E.float(plane, q), q)
                    }
                }
                E.setFloat(pv, k, best)
                pi[k] = Int64(at)
                k &+= 1
            }
        }
    }
}

private struct MaxPoolBackward: ElementVisitor {
    let grad: TensorImpl, indices: TensorImpl, g: WindowGeometry, gradIn: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pg = UnsafePointer(HostBackend.address(grad).assumingMemoryBound(to: E.Stored.self))
        let pi = UnsafePointer(HostBackend.address(indices).assumingMemoryBound(to: Int64.self))
        let po = HostBackend.address(gradIn).assumingMemoryBound(to: E.Stored.self)
        let size = g.input.0 * g.input.1, outSize = g.output.0 * g.output.1
        // Windows that cannot overlap (stride at least the dilated kernel): each input gets at
        // most one output's gradient, so the gradient's stored values are moved as they are.
        if g.stride.0 >= (g.kernel.0 - 1) * g.dilation.0 + 1 && g.stride.1 >= (g.kernel.1 - 1) * g.dilation.1 + 1 {
            HostThreads.forEachRange(gradIn.shape[0], grain: planeGrain(g), align: 1) { planes in
                memset(po + planes.lowerBound * size, 0, planes.count * size * MemoryLayout<E.Stored>.stride)  // zero in every dtype
                for k in (planes.lowerBound * outSize)..<(planes.upperBound * outSize) where pi[k] >= 0 {
                    po[k / outSize * size + Int(pi[k])] = pg[k]
                }
            }
            return
        }
        HostThreads.forEachRange(gradIn.shape[0], grain: planeGrain(g), align: 1) { planes in
            var acc = [E.Real](repeating: 0, count: size)
            for p in planes {
                for q in 0..<size { acc[q] = 0 }
                for k in (p * outSize)..<((p + 1) * outSize) where pi[k] >= 0 {
                    acc[Int(pi[k])] += E.float(pg, k)
                }
                for q in 0..<size { E.setFloat(po, p * size + q, acc[q]) }
            }
        }
    }
}

/// Host convolution: the im2col / col2im window gathers, and direct passes through oneDNN
/// where it is linked (for the problems it takes; the op layer composes the others).
extension HostBackend: ConvolutionKernels, DirectConvolutionKernels {
    /// Whether oneDNN takes this pass: `tensors` are all its operands, `bias` whether a
    /// forward adds one.
    static func takesConvolution(
        _ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, _ tensors: [TensorImpl],
        bias: Bool
    ) -> Bool {
        #if canImport(CDNNL)
        return DNNL.takesConvolution(pass, problem, tensors, bias: bias)
        #else
        return false
        #endif
    }

    func im2col(_ x: TensorImpl, _ g: WindowGeometry, into cols: TensorImpl) {
        dispatch(x.dtype, Im2Col(x: x, g: g, cols: cols))
    }

    func col2im(_ cols: TensorImpl, _ g: WindowGeometry, into x: TensorImpl) {
        dispatch(x.dtype, Col2Im(cols: cols, g: g, x: x))
    }

    func convolution(
        _ pass: ConvolutionPassKind, _ problem: ConvolutionProblem, x: TensorImpl?, weight: TensorImpl?,
        bias: TensorImpl?, gradOut: TensorImpl?, into out: TensorImpl
    ) throws {
        #if canImport(CDNNL)
        // oneDNN's argument indices: SRC 1, WEIGHTS 33, BIAS 41, DST 17, DIFF_SRC 129,
        // DIFF_WEIGHTS 161, DIFF_DST 145.
        var args: [(Int32, TensorImpl)]
        switch pass {
        case .forward:
            guard let x, let weight else { throw LucidError.runtime("convolution: a forward pass needs x and weight") }
            args = [(DNNL.Arg.src, x), (DNNL.Arg.weights, weight), (DNNL.Arg.dst, out)]
            if let bias { args.append((DNNL.Arg.bias, bias)) }
        case .backwardData:
            guard let gradOut, let weight else {
                throw LucidError.runtime("convolution: a backward-data pass needs the output gradient and weight")
            }
            args = [(DNNL.Arg.diffDst, gradOut), (DNNL.Arg.weights, weight), (DNNL.Arg.diffSrc, out)]
        case .backwardWeights:
            guard let x, let gradOut else {
                throw LucidError.runtime("convolution: a backward-weights pass needs x and the output gradient")
            }
            args = [(DNNL.Arg.src, x), (DNNL.Arg.diffDst, gradOut), (DNNL.Arg.diffWeights, out)]
        }
        if DNNL.convolution(pass, problem, args) { return }
        #endif
        throw LucidError.runtime("convolution: oneDNN did not run a \(pass) pass it had taken for \(problem)")
    }
}

private struct Im2Col: ElementVisitor {
    let x: TensorImpl, g: WindowGeometry, cols: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let px = UnsafePointer(HostBackend.address(x).assumingMemoryBound(to: E.Stored.self))
        let pc = HostBackend.address(cols).assumingMemoryBound(to: E.Stored.self)
        let n = x.shape[0], c = x.shape[1], (h, w) = g.input, (oh, ow) = g.output
        let (kh, kw) = g.kernel, (sh, sw) = g.stride, (ph, pw) = g.padding, (dh, dw) = g.dilation
        let st = x.strides
        if cols.numel == 0 { return }
        let zero = withUnsafeTemporaryAllocation(of: E.Stored.self, capacity: 1) { buf -> E.Stored in
            let p = buf.baseAddress!  // capacity 1, never nil
            E.setFloat(p, 0, 0)
            return p.pointee
        }
        var k = 0
        for b in 0..<n {
            for ch in 0..<c {
                let plane = b * st[0] + ch * st[1]
                for i in 0..<kh {
                    for j in 0..<kw {
                        for oy in 0..<oh {
                            let y = oy * sh - ph + i * dh
                            let rowOK = y >= 0 && y < h
                            for ox in 0..<ow {
                                let xx = ox * sw - pw + j * dw
                                pc[k] = rowOK && xx >= 0 && xx < w ? px[plane + y * st[2] + xx * st[3]] : zero
                                k += 1
                            }
                        }
                    }
                }
            }
        }
    }
}

private struct Col2Im: ElementVisitor {
    let cols: TensorImpl, g: WindowGeometry, x: TensorImpl
    func visit<E: HostElement>(_: E.Type) {
        let pc = UnsafePointer(HostBackend.address(cols).assumingMemoryBound(to: E.Stored.self))
        let px = HostBackend.address(x).assumingMemoryBound(to: E.Stored.self)
        let n = x.shape[0], c = x.shape[1], (h, w) = g.input, (oh, ow) = g.output
        let (kh, kw) = g.kernel, (sh, sw) = g.stride, (ph, pw) = g.padding, (dh, dw) = g.dilation
        let cs = cols.strides
        var acc = [E.Real](repeating: 0, count: h * w)
        for b in 0..<n {
            for ch in 0..<c {
                for q in 0..<acc.count { acc[q] = 0 }
                for i in 0..<kh {
                    for j in 0..<kw {
                        let row = b * cs[0] + ((ch * kh + i) * kw + j) * cs[1]
                        for oy in 0..<oh {
                            let y = oy * sh - ph + i * dh
                            guard y >= 0 && y < h else { continue }
                            for ox in 0..<ow {
                                let xx = ox * sw - pw + j * dw
                                guard xx >= 0 && xx < w else { continue }
                                acc[y * w + xx] += E.float(pc, row + (oy * ow + ox) * cs[2])
                            }
                        }
                    }
                }
                let base = (b * c + ch) * h * w
                for q in 0..<acc.count { E.setFloat(px, base + q, acc[q]) }
            }
        }
    }
}

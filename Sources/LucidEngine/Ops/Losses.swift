/// mse, l1, nll, cross-entropy and binary cross-entropy (of probabilities and of logits). Every
/// loss but binary cross-entropy of probabilities is on the float32 autocast list; outside
/// autocast, floating inputs of mixed dtypes promote to the widest (as PyTorch's arithmetic
/// does), whatever their order.
package enum Losses {
    static let mse = OpInfo("mse_loss", .float32)
    static let l1 = OpInfo("l1_loss", .float32)
    static let nll = OpInfo("nll_loss", .float32)
    static let crossEntropy = OpInfo("cross_entropy", .float32)
    static let bceWithLogits = OpInfo("binary_cross_entropy_with_logits", .float32)
    /// Refused under autocast (see `binaryCrossEntropy`), so it takes no policy and is not in
    /// the table; its declaration names its backward node.
    static let bce = OpInfo("binary_cross_entropy", .none)
    static let infos = [mse, l1, nll, crossEntropy, bceWithLogits]

    /// How per-element losses are combined. Raw values are the C ABI's codes.
    package enum Reduction: Int32, Sendable, CaseIterable { case none = 0, mean = 1, sum = 2 }

    private static func reduced(_ loss: TensorImpl, _ r: Reduction) throws -> TensorImpl {
        switch r {
        case .none: return loss
        case .mean: return try Composite.mean(loss, nil)
        case .sum: return try Composite.sum(loss, nil)
        }
    }

    private static func pairwise(
        _ op: OpInfo, _ input: TensorImpl, _ target: TensorImpl, _ r: Reduction,
        _ body: (TensorImpl) throws -> TensorImpl
    ) throws -> TensorImpl {
        try Ops.checkSameDevice(op.name, [input, target])
        guard input.shape == target.shape else {
            throw LucidError.value("\(op.name): input shape \(input.shape) and target shape \(target.shape) must match")
        }
        return try op.run([input, target]) { t in
            try Composite.checkFloat(op.name, t)
            return try reduced(try body(try Composite.sub(t[0], t[1])), r)
        }
    }

    package static func mse(_ input: TensorImpl, _ target: TensorImpl, reduction: Reduction) throws -> TensorImpl {
        try pairwise(mse, input, target, reduction) { try Composite.mul($0, $0) }
    }

    package static func l1(_ input: TensorImpl, _ target: TensorImpl, reduction: Reduction) throws -> TensorImpl {
        try pairwise(l1, input, target, reduction) { try Elementwise.unary(.abs, $0) }
    }

    /// Input [N, C, d...] (or [C]) and integer targets [N, d...] (or []), as [N, C, M] and
    /// [N, M] plus the shape per-element losses take.
    private static func classLayout(_ op: String, _ input: TensorImpl, _ target: TensorImpl) throws -> (TensorImpl, TensorImpl, [Int]) {
        guard input.ndim >= 1 else { throw LucidError.value("\(op): input must have a class dimension, got a 0-d tensor") }
        let x = input.ndim == 1 ? try ShapeOps.unsqueeze(input, 0) : input
        let y = input.ndim == 1 ? try ShapeOps.reshape(target, [1]) : target
        let expected = [x.shape[0]] + Array(x.shape.dropFirst(2))
        guard y.shape == expected else {
            throw LucidError.value(
                "\(op): expected target of shape \(input.ndim == 1 ? [] : expected) for input of shape \(input.shape), got \(target.shape)")
        }
        guard !y.dtype.isFloatingPoint, y.dtype != .bool else {
            throw LucidError.type(
                "\(op): class-index targets must be an integer tensor, got \(target.dtype) (class probabilities need the input's shape)")
        }
        let n = x.shape[0], c = x.shape[1], m = x.shape.dropFirst(2).reduce(1, *)
        return (
            try ShapeOps.reshape(x, [n, c, m]), try ShapeOps.reshape(try Ops.cast(y, to: .int64), [n, m]),
            input.ndim == 1 ? [] : expected
        )
    }

    private static func checkWeight(_ op: String, _ weight: TensorImpl?, classes: Int) throws {
        if let weight, weight.shape != [classes] {
            throw LucidError.value("\(op): weight must have shape [\(classes)] (one per class), got \(weight.shape)")
        }
    }

    /// The negative log-likelihood of the targets under log-probabilities [N, C, M], reduced by
    /// `r` (per-element losses take `shape`), and the per-element weights (0 where ignored).
    private static func picked(
        _ logp: TensorImpl, _ y: TensorImpl, weight: TensorImpl?, ignoreIndex: Int, _ r: Reduction, shape: [Int]
    ) throws -> (TensorImpl, TensorImpl) {
        // A weight that requires a gradient takes the composed graph; otherwise the loss is one
        // node (the reduction included), whose backward puts -w·g (over the weights' total for
        // a mean) at each target's place and zero elsewhere.
        if let weight, Autograd.tracks(weight) {
            let (loss, w) = try pickedTerms(logp, y, weight: weight, ignoreIndex: ignoreIndex)
            return (try reducedNLL(loss, w, r, shape: shape), w)
        }
        let (loss, w, total) = try GradMode.with(false) {
            let (loss, w) = try nllTerms(logp, y, weight: weight, ignoreIndex: ignoreIndex)
            let total = r == .mean ? try Composite.sum(w, nil) : nil
            let reduced = r == .none ? loss : try Composite.sum(loss, nil)
            return (try total.map { try Composite.div(reduced, $0) } ?? reduced, w, total)
        }
        guard Autograd.tracks(logp) else { return (r == .none ? try ShapeOps.reshape(loss, shape) : loss, w) }
        let logpShape = logp.shape
        let node = Autograd.record(loss, Autograd.name(nll), [logp], saved: [y, w, total]) { g in
            [try nllGradient(g, total: total, y, w, ignoreIndex: ignoreIndex, shape: logpShape)]
        }
        return (r == .none ? try ShapeOps.reshape(node, shape) : node, w)
    }

    /// The per-element losses and weights of `picked`: the backend's kernel, or composed.
    private static func nllTerms(_ logp: TensorImpl, _ y: TensorImpl, weight: TensorImpl?, ignoreIndex: Int)
        throws -> (TensorImpl, TensorImpl)
    {
        let (n, c, m) = (logp.shape[0], logp.shape[1], logp.shape[2])
        let loss = try TensorImpl.empty([n, m], dtype: logp.dtype, on: logp.backend)
        let w = try TensorImpl.empty([n, m], dtype: logp.dtype, on: logp.backend)
        let call = KernelCall(
            .nllTerms(ignoreIndex: Int64(ignoreIndex)), reads: Operands([logp, y] + (weight.map { [$0] } ?? [])), writes: [loss, w])
        let ran: Void? = try loss.runUnlessComposed(ClassLossKernels.self, call, "nll_loss") {
            try $0.nllTerms(logp, target: y, weight: weight, ignoreIndex: Int64(ignoreIndex), loss: loss, weights: w) {
                outOfBounds(classes: c, ignoreIndex: ignoreIndex, "got \($0)")
            }
        }
        return ran != nil ? (loss, w) : try pickedTerms(logp, y, weight: weight, ignoreIndex: ignoreIndex)
    }

    /// The gradient of `picked`'s loss over log-probabilities of `shape` [N, C, M], from the
    /// loss's gradient `g` ([N, M], or 0-d for a reduction): the backend's kernel, or a scaled
    /// scatter of the weights.
    private static func nllGradient(
        _ g: TensorImpl, total: TensorImpl?, _ y: TensorImpl, _ w: TensorImpl, ignoreIndex: Int, shape: [Int]
    ) throws -> TensorImpl {
        let (n, m) = (shape[0], shape[2])
        let spread = g.ndim == 0 ? g.view(shape: [n, m], strides: [0, 0], offset: g.offset) : try ShapeOps.reshape(g, [n, m])
        let gradIn = try TensorImpl.empty(shape, dtype: g.dtype, on: g.backend)
        let call = KernelCall(
            .nllBackward(ignoreIndex: Int64(ignoreIndex)), reads: Operands([spread, y, w] + (total.map { [$0] } ?? [])),
            writes: [gradIn])
        let ran: Void? = gradIn.runUnlessComposed(ClassLossKernels.self, call, "nll_loss") {
            $0.nllBackward(spread, total: total, target: y, weights: w, ignoreIndex: Int64(ignoreIndex), into: gradIn)
        }
        if ran != nil { return gradIn }
        let ignored = try Comparison.compare(.eq, y, scalar: ScalarOperand(int: Int64(ignoreIndex)))
        var share = try Composite.mul(try Elementwise.unary(.neg, try total.map { try Composite.div(g, $0) } ?? g), w)
        // Over a total of 0 (every target ignored) the share is 0/0; an ignored target takes
        // no gradient, as in PyTorch.
        if total != nil { share = try Comparison.where(ignored, scalar: ScalarOperand(float: 0), share) }
        let safe = try Comparison.where(ignored, scalar: ScalarOperand(int: 0), y)
        return try Indexing.scatterAdd(
            try ShapeOps.unsqueeze(share, 1), dim: 1, index: try ShapeOps.unsqueeze(safe, 1), shape: shape)
    }

    private static func outOfBounds(classes c: Int, ignoreIndex: Int, _ detail: String) -> LucidError {
        LucidError.index("target out of bounds: class indices must be in [0, \(c)) or equal ignore_index=\(ignoreIndex) (\(detail))")
    }

    /// The composed form of `nllTerms`: the per-element losses and weights (0 where ignored).
    private static func pickedTerms(_ logp: TensorImpl, _ y: TensorImpl, weight: TensorImpl?, ignoreIndex: Int)
        throws -> (TensorImpl, TensorImpl)
    {
        let ignored = try Comparison.compare(.eq, y, scalar: ScalarOperand(int: Int64(ignoreIndex)))
        let safe = try Comparison.where(ignored, scalar: ScalarOperand(int: 0), y)
        let c = logp.shape[1]
        let chosen: TensorImpl
        do {
            chosen = try ShapeOps.squeeze(try Indexing.gather(logp, dim: 1, index: try ShapeOps.unsqueeze(safe, 1)), dims: [1])
        } catch let e as LucidError where e.kind == .index {
            throw outOfBounds(classes: c, ignoreIndex: ignoreIndex, e.message)
        }
        let keep = try Ops.cast(try Comparison.compare(.ne, y, scalar: ScalarOperand(int: Int64(ignoreIndex))), to: logp.dtype)
        let w =
            try weight.map { wc in
                try Composite.mul(
                    try ShapeOps.reshape(try Indexing.indexSelect(wc, dim: 0, index: try ShapeOps.reshape(safe, [-1])), safe.shape), keep)
            } ?? keep
        return (try Elementwise.unary(.neg, try Composite.mul(chosen, w)), w)
    }

    private static func reducedNLL(_ loss: TensorImpl, _ w: TensorImpl, _ r: Reduction, shape: [Int]) throws -> TensorImpl {
        switch r {
        case .none: return try ShapeOps.reshape(loss, shape)
        case .sum: return try Composite.sum(loss, nil)
        case .mean: return try Composite.div(try Composite.sum(loss, nil), try Composite.sum(w, nil))
        }
    }

    /// torch.nn.functional.nll_loss on log-probabilities [N, C, d...] and class indices.
    package static func nll(
        _ input: TensorImpl, _ target: TensorImpl, weight: TensorImpl?, ignoreIndex: Int,
        reduction: Reduction
    ) throws -> TensorImpl {
        let op = nll.name
        try Ops.checkSameDevice(op, [input, target] + (weight.map { [$0] } ?? []))
        let (x, y, shape) = try classLayout(op, input, target)
        try checkWeight(op, weight, classes: x.shape[1])
        return try nll.run([x] + (weight.map { [$0] } ?? [])) { t in
            try Composite.checkFloat(op, t)
            let weight = t.count > 1 ? try Ops.cast(t[1], to: t[0].dtype) : nil
            return try picked(t[0], y, weight: weight, ignoreIndex: ignoreIndex, reduction, shape: shape).0
        }
    }

    /// torch.nn.functional.cross_entropy on logits [N, C, d...] with class-index targets (with
    /// `ignoreIndex` and `labelSmoothing`) or class-probability targets of the input's shape.
    package static func crossEntropy(
        _ input: TensorImpl, _ target: TensorImpl, weight: TensorImpl?, ignoreIndex: Int,
        reduction: Reduction, labelSmoothing: Double
    ) throws -> TensorImpl {
        let op = crossEntropy.name
        try Ops.checkSameDevice(op, [input, target] + (weight.map { [$0] } ?? []))
        guard labelSmoothing >= 0 && labelSmoothing <= 1 else {
            throw LucidError.value("\(op): label_smoothing must be between 0.0 and 1.0, got \(labelSmoothing)")
        }
        guard input.ndim >= 1 else { throw LucidError.value("\(op): input must have a class dimension, got a 0-d tensor") }
        let classes = input.shape[input.ndim == 1 ? 0 : 1]
        try checkWeight(op, weight, classes: classes)
        if target.dtype.isFloatingPoint {
            return try probabilityTargets(input, target, weight: weight, reduction: reduction, smoothing: labelSmoothing)
        }
        let (x, y, shape) = try classLayout(op, input, target)
        return try crossEntropy.run([x] + (weight.map { [$0] } ?? [])) { t in
            try Composite.checkFloat(op, t)
            let logp = try Activations.logSoftmax(t[0], dim: 1)
            let w = t.count > 1 ? try Ops.cast(t[1], to: logp.dtype) : nil
            let (nllLoss, wsel) = try picked(logp, y, weight: w, ignoreIndex: ignoreIndex, reduction, shape: shape)
            guard labelSmoothing > 0 else { return nllLoss }
            // PyTorch's smoothing term: -Σ_c w_c·log p_c, zero where ignored, normalised like
            // the nll term.
            let weighted = try w.map { try Composite.mul(logp, try ShapeOps.reshape($0, [1, classes, 1])) } ?? logp
            let keep = try Ops.cast(try Comparison.compare(.ne, y, scalar: ScalarOperand(int: Int64(ignoreIndex))), to: logp.dtype)
            let smooth = try Composite.mul(try Elementwise.unary(.neg, try Composite.sum(weighted, [1])), keep)
            let smoothLoss = try reducedNLL(smooth, wsel, reduction, shape: shape)
            return try Composite.add(try Composite.mul(nllLoss, 1 - labelSmoothing), try Composite.mul(smoothLoss, labelSmoothing / Double(classes)))
        }
    }

    private static func probabilityTargets(
        _ input: TensorImpl, _ target: TensorImpl, weight: TensorImpl?,
        reduction: Reduction, smoothing: Double
    ) throws -> TensorImpl {
        let op = crossEntropy.name
        guard target.shape == input.shape else {
            throw LucidError.value("\(op): class-probability targets must have the input's shape \(input.shape), got \(target.shape)")
        }
        let x = input.ndim == 1 ? try ShapeOps.unsqueeze(input, 0) : input
        let p = input.ndim == 1 ? try ShapeOps.unsqueeze(target, 0) : target
        let classes = x.shape[1]
        return try crossEntropy.run([x, p] + (weight.map { [$0] } ?? [])) { t in
            try Composite.checkFloat(op, t)
            let dtype = Composite.widestType(t)
            let logp = try Activations.logSoftmax(try Ops.cast(t[0], to: dtype), dim: 1)
            var q = try Ops.cast(t[1], to: dtype)
            if smoothing > 0 { q = try Composite.add(try Composite.mul(q, 1 - smoothing), smoothing / Double(classes)) }
            var terms = try Composite.mul(logp, q)
            if t.count > 2 {
                terms = try Composite.mul(
                    terms, try ShapeOps.reshape(try Ops.cast(t[2], to: dtype), [1, classes] + [Int](repeating: 1, count: x.ndim - 2)))
            }
            let loss = try Elementwise.unary(.neg, try Composite.sum(terms, [1]))
            switch reduction {
            case .none: return input.ndim == 1 ? try ShapeOps.reshape(loss, []) : loss
            case .sum: return try Composite.sum(loss, nil)
            case .mean:
                return try Composite.div(
                    try Composite.sum(loss, nil), try Ops.scalarTensor(ScalarOperand(int: Int64(x.shape[0])), dtype: loss.dtype, device: loss.device))
            }
        }
    }

    /// Binary cross-entropy of probabilities, as PyTorch computes it: per element
    /// `w·((y - 1)·max(log1p(-x), -100) - y·max(log x, -100))`. Its backward is PyTorch's
    /// closed form, `w·(x - y) / max(x·(1 - x), 1e-12)` for the input and `-w·logit(x)` for the
    /// target. Refused under autocast, as PyTorch refuses it on its GPUs: a float16 log of a
    /// probability is unsafe, and the sigmoid before it belongs in `bceWithLogits`.
    package static func binaryCrossEntropy(
        _ input: TensorImpl, _ target: TensorImpl, weight: TensorImpl?, reduction: Reduction
    ) throws -> TensorImpl {
        let op = bce.name
        let all = [input, target] + (weight.map { [$0] } ?? [])
        try Ops.checkSameDevice(op, all)
        guard Autocast.castTarget(input.device) == nil else {
            throw LucidError(
                .runtime,
                "binary_cross_entropy and BCELoss are unsafe to autocast: use binary_cross_entropy_with_logits or "
                    + "BCEWithLogitsLoss (they take logits), or run it outside the autocast scope")
        }
        guard input.shape == target.shape else {
            throw LucidError.value("\(op): target shape \(target.shape) must be the same as input shape \(input.shape)")
        }
        if let weight, (try? Shape.broadcast(weight.shape, input.shape, op: op)) != input.shape {
            throw LucidError.value("\(op): weight of shape \(weight.shape) does not broadcast to the input's shape \(input.shape)")
        }
        try Composite.checkFloat(op, all)
        let dtype = Composite.widestType(all)
        let x = try Ops.cast(input, to: dtype), y = try Ops.cast(target, to: dtype)
        let w = try weight.map { try Ops.cast($0, to: dtype) }
        // A weight that requires a gradient takes the composed graph; otherwise the per-element
        // losses are one node whose backward is one closed form.
        if w?.requiresGrad == true { return try reduced(try bceTerms(x, y, w), reduction) }
        let loss = try GradMode.with(false) { try bceTerms(x, y, w) }
        guard Autograd.tracks(x, y) else { return try reduced(loss, reduction) }
        let wantsX = x.requiresGrad, wantsY = y.requiresGrad
        let node = Autograd.record(loss, Autograd.name(bce), [x, y], saved: [x, y, w]) { g in
            let gw = try w.map { try Composite.mul(g, $0) } ?? g
            var gx: TensorImpl? = nil
            if wantsX {
                let spread = try Composite.mul(x, try oneMinus(x))
                let floor = try Elementwise.binary(.maximum, spread, scalar: ScalarOperand(float: 1e-12), scalarFirst: false)
                gx = try Composite.mul(gw, try Composite.div(try Composite.sub(x, y), floor))
            }
            // -logit(x) = log1p(-x) - log(x)
            let gy = try wantsY ? Composite.mul(gw, try Composite.sub(try log1pNeg(x), try Elementwise.unary(.log, x))) : nil
            return [gx, gy]
        }
        return try reduced(node, reduction)
    }

    private static func oneMinus(_ x: TensorImpl) throws -> TensorImpl {
        try Elementwise.binary(.sub, x, scalar: ScalarOperand(int: 1), scalarFirst: true)
    }

    private static func log1pNeg(_ x: TensorImpl) throws -> TensorImpl {
        try Elementwise.unary(.log1p, try Elementwise.unary(.neg, x))
    }

    /// The per-element losses of `binaryCrossEntropy` (`x`, `y` and `w` of one dtype).
    private static func bceTerms(_ x: TensorImpl, _ y: TensorImpl, _ w: TensorImpl?) throws -> TensorImpl {
        func clamped(_ log: TensorImpl) throws -> TensorImpl {
            try Elementwise.binary(.maximum, log, scalar: ScalarOperand(float: -100), scalarFirst: false)
        }
        let logX = try clamped(try Elementwise.unary(.log, x)), log1mX = try clamped(try log1pNeg(x))
        let yMinusOne = try Elementwise.binary(.sub, y, scalar: ScalarOperand(int: 1), scalarFirst: false)
        let loss = try Composite.sub(try Composite.mul(yMinusOne, log1mX), try Composite.mul(y, logX))
        return try w.map { try Composite.mul(loss, $0) } ?? loss
    }

    /// Sigmoid + binary cross-entropy in one stable expression:
    /// (1 - y)·x + (1 + (pw - 1)·y)·(log(1 + e^-|x|) + max(-x, 0)).
    package static func bceWithLogits(
        _ input: TensorImpl, _ target: TensorImpl, weight: TensorImpl?, posWeight: TensorImpl?,
        reduction: Reduction
    ) throws -> TensorImpl {
        let op = bceWithLogits.name
        let extras = [weight, posWeight].compactMap { $0 }
        try Ops.checkSameDevice(op, [input, target] + extras)
        guard input.shape == target.shape else {
            throw LucidError.value("\(op): target shape \(target.shape) must be the same as input shape \(input.shape)")
        }
        return try bceWithLogits.run([input, target] + extras) { t in
            try Composite.checkFloat(op, t)
            let dtype = Composite.widestType(t)
            let x = try Ops.cast(t[0], to: dtype), y = try Ops.cast(t[1], to: dtype)
            var rest = try t.dropFirst(2).map { try Ops.cast($0, to: dtype) }.makeIterator()
            let w = weight == nil ? nil : rest.next(), pw = posWeight == nil ? nil : rest.next()
            // Weights that require a gradient take the composed graph; otherwise the per-element
            // losses are one node whose backward is one closed form.
            if w?.requiresGrad == true || pw?.requiresGrad == true {
                return try reduced(try bceWithLogitsTerms(x, y, w, pw).loss, reduction)
            }
            let (loss, softplusNeg, coefficient) = try GradMode.with(false) { try bceWithLogitsTerms(x, y, w, pw) }
            guard Autograd.tracks(x, y) else { return try reduced(loss, reduction) }
            let wantsX = x.requiresGrad, wantsY = y.requiresGrad
            let node = Autograd.record(loss, Autograd.name(bceWithLogits), [x, y], saved: [x, y, w, pw]) { g in
                let gw = try w.map { try Composite.mul(g, $0) } ?? g
                // d/dx = (1 - y) - coefficient·σ(-x), which is σ(x) - y without pos_weight.
                var gx: TensorImpl? = nil
                if wantsX {
                    let fromX: TensorImpl
                    if let coefficient {
                        let sigmoidNeg = try Elementwise.unary(.sigmoid, try Elementwise.unary(.neg, x))
                        fromX = try Composite.sub(
                            try Elementwise.binary(.sub, y, scalar: ScalarOperand(int: 1), scalarFirst: true),
                            try Composite.mul(coefficient, sigmoidNeg))
                    } else {
                        fromX = try Composite.sub(try Elementwise.unary(.sigmoid, x), y)
                    }
                    gx = try Composite.mul(gw, fromX)
                }
                // d/dy = -x + (pos_weight - 1)·softplus(-x).
                var gy: TensorImpl? = nil
                if wantsY {
                    var fromY = try Elementwise.unary(.neg, x)
                    if let pw { fromY = try Composite.add(fromY, try Composite.mul(try Composite.add(pw, -1), softplusNeg)) }
                    gy = try Composite.mul(gw, fromY)
                }
                return [try gx.map { try Autograd.reduce($0, to: x.shape) }, try gy.map { try Autograd.reduce($0, to: y.shape) }]
            }
            return try reduced(node, reduction)
        }
    }

    /// The per-element losses of `bceWithLogits` (`x` and `y` of one dtype, `w` and `pw`
    /// broadcasting to them), with the terms its closed-form backward reads: softplus(-x) and
    /// the coefficient 1 + (pw - 1)·y (nil without pos_weight).
    private static func bceWithLogitsTerms(_ x: TensorImpl, _ y: TensorImpl, _ w: TensorImpl?, _ pw: TensorImpl?) throws
        -> (loss: TensorImpl, softplusNeg: TensorImpl, coefficient: TensorImpl?)
    {
        let softplusNeg = try Composite.add(
            try Elementwise.unary(.log1p, try Elementwise.unary(.exp, try Elementwise.unary(.neg, try Elementwise.unary(.abs, x)))),
            try Elementwise.unary(.relu, try Elementwise.unary(.neg, x)))
        let linear = try Composite.mul(try Elementwise.binary(.sub, y, scalar: ScalarOperand(int: 1), scalarFirst: true), x)
        let coefficient = try pw.map { try Composite.add(try Composite.mul(try Composite.add($0, -1), y), 1) }
        var loss = try Composite.add(linear, try coefficient.map { try Composite.mul($0, softplusNeg) } ?? softplusNeg)
        if let w { loss = try Composite.mul(loss, w) }
        return (loss, softplusNeg, coefficient)
    }
}

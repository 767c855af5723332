import Foundation
import LucidEngine
import Testing

// The Swift API's modules, through its public surface only (no @testable import): layers
// against arithmetic written out here and against the same ops called directly, state dicts
// with PyTorch's keys, modes, gradients by finite differences, autocast policies, errors and
// the inspector.

/// Deterministic weights for every entry of `module`'s state dict, loaded into it.
private func loadDeterministic(_ module: Module, seed: UInt64 = 1, scale: Float = 0.5) throws -> [String: Tensor] {
    var state: [String: Tensor] = [:]
    for (i, (key, t)) in module.stateDict().sorted(by: { $0.key < $1.key }).enumerated() {
        if !t.dtype.isFloatingPoint {
            state[key] = t
            continue
        }
        let values = Reference.values(t.numel, seed: seed &+ UInt64(i)).map { $0 * scale }
        state[key] = try Tensor(values, shape: t.shape, dtype: t.dtype)
    }
    try module.loadStateDict(state)
    return state
}

private func expectClose(_ a: [Float], _ b: [Float], _ tol: Float, _ what: String = "") {
    #expect(a.count == b.count, "\(what): \(a.count) values, expected \(b.count)")
    let worst = zip(a, b).map { Swift.abs($0 - $1) / (1 + Swift.abs($1)) }.max() ?? 0
    #expect(worst <= tol, "\(what): max relative error \(worst) > \(tol)")
}

private func sigmoid(_ x: Double) -> Double { 1 / (1 + Foundation.exp(-x)) }

@Suite struct ModuleStateTests {
    @Test func layersHavePyTorchsNamesAndShapes() throws {
        let model = Sequential(try Conv2d(3, 4, kernelSize: 3), try BatchNorm2d(4), ReLU(), Flatten(), try Linear(16, 2))
        #expect(
            model.stateDictKeys() == [
                "0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked",
                "4.weight", "4.bias",
            ])
        let state = model.stateDict()
        #expect(state["0.weight"]?.shape == [4, 3, 3, 3])
        #expect(state["1.num_batches_tracked"]?.dtype == .int64)
        #expect(state["1.num_batches_tracked"]?.shape == [])
        #expect(state["4.weight"]?.shape == [2, 16])
        #expect(model.namedParameters().map(\.0) == ["0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"])
        #expect(model.namedBuffers().map(\.0) == ["1.running_mean", "1.running_var", "1.num_batches_tracked"])
        #expect(model.parameters().allSatisfy { $0.requiresGrad })

        let layer = try TransformerEncoderLayer(dModel: 8, nhead: 2, dimFeedforward: 16)
        #expect(
            layer.stateDictKeys() == [
                "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight", "self_attn.out_proj.bias",
                "linear1.weight", "linear1.bias", "linear2.weight", "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight",
                "norm2.bias",
            ])
        #expect(layer.stateDict()["self_attn.in_proj_weight"]?.shape == [24, 8])

        let lstm = try LSTM(3, 5, numLayers: 2, bidirectional: true)
        let lstmShapes = Dictionary(uniqueKeysWithValues: lstm.namedParameters().map { ($0.0, $0.1.shape) })
        #expect(lstmShapes.count == 16)
        #expect(lstmShapes["weight_ih_l0"] == [20, 3])
        #expect(lstmShapes["weight_hh_l0_reverse"] == [20, 5])
        #expect(lstmShapes["weight_ih_l1"] == [20, 10])
        #expect(lstmShapes["bias_hh_l1_reverse"] == [20])
        #expect(try GRU(3, 5).stateDictKeys() == ["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"])
        #expect(try GRU(3, 5).stateDict()["weight_ih_l0"]?.shape == [15, 3])
        #expect(try Embedding(10, 4).stateDictKeys() == ["weight"])
        #expect(try LayerNorm(6).stateDictKeys() == ["weight", "bias"])
        #expect(try Linear(2, 3, bias: false).stateDictKeys() == ["weight"])
    }

    @Test func loadStateDictCopiesInPlaceAndRefusesWhatDoesNotFit() throws {
        let model = Sequential(try Linear(3, 2), Tanh(), try Linear(2, 1))
        let params = model.parameters()
        let opt = try SGD(params, lr: 0.1)
        let state = try loadDeterministic(model)
        // In place: the tensors the optimizer holds see the loaded values.
        #expect(try opt.parameters[0].toArray() == state["0.weight"]?.toArray())
        #expect(try model.stateDict()["2.bias"]?.toArray() == state["2.bias"]?.toArray())

        var missing = state
        missing["2.bias"] = nil
        var e = lucidError { try model.loadStateDict(missing) }
        #expect(e?.kind == .value)
        #expect(e?.message.contains("missing keys [\"2.bias\"]") == true, "\(String(describing: e))")
        var extra = state
        extra["3.weight"] = try Tensor.zeros([1])
        e = lucidError { try model.loadStateDict(extra) }
        #expect(e?.message.contains("unexpected keys [\"3.weight\"]") == true, "\(String(describing: e))")
        var wrong = state
        wrong["0.weight"] = try Tensor.zeros([3, 2])
        e = lucidError { try model.loadStateDict(wrong) }
        #expect(e?.message.contains("\"0.weight\" has shape [3, 2] in the state dict, the module's has [2, 3]") == true)
        // Nothing was copied by the refused calls.
        #expect(try model.stateDict()["0.weight"]?.toArray() == state["0.weight"]?.toArray())

        extra["0.weight"] = try Tensor.ones([2, 3])
        extra["2.bias"] = nil
        let (miss, unexpected) = try model.loadStateDict(extra, strict: false)
        #expect(miss == ["2.bias"] && unexpected == ["3.weight"])
        #expect(try params[0].toArray() == [Float](repeating: 1, count: 6))
    }

    @Test func freezingAndMovingKeepTheValues() throws {
        let model = Sequential(try Linear(2, 2), try LayerNorm(2))
        _ = try loadDeterministic(model)
        try model.freeze()
        #expect(model.parameters().allSatisfy { !$0.requiresGrad })
        let x = try Tensor([1, 2], shape: [1, 2]).requiringGrad()
        try model(x).sum().backward()
        #expect(x.grad != nil)
        #expect(model.parameters().allSatisfy { $0.grad == nil })
        try model.unfreeze()
        #expect(model.parameters().allSatisfy { $0.requiresGrad })

        let before = try model(try Tensor([0.5, -1], shape: [1, 2])).toArray()
        try model.to(device: .metal)
        #expect(model.parameters().allSatisfy { $0.device == .metal && $0.requiresGrad })
        expectClose(try model(try Tensor([0.5, -1], shape: [1, 2], device: .metal)).toArray(), before, 1e-6, "on metal")
        #expect(throws: LucidError.self) { try model.to(dtype: .int32) }
    }

    @Test func registrationRefusesBadNames() throws {
        let m = Module()
        try m.registerParameter("w", try Tensor.zeros([1]).requiringGrad())
        #expect(lucidErrorKind { try m.registerBuffer("w", try Tensor.zeros([1])) } == .value)
        #expect(lucidErrorKind { try m.registerModule("a.b", Module()) } == .value)
        #expect(lucidErrorKind { _ = try m(try Tensor.zeros([1])) } == .runtime)
        try m.registerModule("inner", Sequential(ReLU()))
        #expect(try m.submodule("inner.0") is ReLU)
        #expect(lucidErrorKind { _ = try m.submodule("inner.1") } == .value)
    }
}

@Suite struct LayerForwardTests {
    @Test func linearAndConvMatchArithmeticWrittenOut() throws {
        let linear = try Linear(3, 2)
        let s = try loadDeterministic(linear)
        let w = try #require(s["weight"]).toArray(), b = try #require(s["bias"]).toArray()
        let xv = Reference.values(12, seed: 9)
        let y = try linear(try Tensor(xv, shape: [4, 3])).toArray()
        var want: [Float] = []
        for i in 0..<4 { for o in 0..<2 { want.append((0..<3).reduce(b[o]) { $0 + xv[i * 3 + $1] * w[o * 3 + $1] }) } }
        expectClose(y, want, 1e-6, "linear")

        let conv = try Conv2d(2, 3, kernelSize: 2, stride: 1, padding: 1)
        let cs = try loadDeterministic(conv)
        let cw = try #require(cs["weight"]).toArray(), cb = try #require(cs["bias"]).toArray()
        let xin = Reference.values(2 * 3 * 3, seed: 4)
        let out = try conv(try Tensor(xin, shape: [1, 2, 3, 3]))
        #expect(out.shape == [1, 3, 4, 4])
        var ref: [Float] = []
        for o in 0..<3 {
            for i in 0..<4 {
                for j in 0..<4 {
                    var acc = Double(cb[o])
                    for c in 0..<2 {
                        for ki in 0..<2 {
                            for kj in 0..<2 {
                                let (r, q) = (i + ki - 1, j + kj - 1)
                                guard (0..<3).contains(r), (0..<3).contains(q) else { continue }
                                acc += Double(xin[c * 9 + r * 3 + q]) * Double(cw[((o * 2 + c) * 2 + ki) * 2 + kj])
                            }
                        }
                    }
                    ref.append(Float(acc))
                }
            }
        }
        expectClose(try out.toArray(), ref, 1e-5, "conv2d")

        let conv1 = try Conv1d(2, 1, kernelSize: 2)
        let c1 = try loadDeterministic(conv1)
        let y1 = try conv1(try Tensor([1, 2, 3, 4, 5, 6], shape: [1, 2, 3])).toArray()
        let k = try #require(c1["weight"]).toArray(), kb = try #require(c1["bias"]).toArray()[0]
        let want1 = (0..<2).map { (t: Int) -> Float in
            let left: Float = k[0] * Float(1 + t) + k[1] * Float(2 + t)
            let right: Float = k[2] * Float(4 + t) + k[3] * Float(5 + t)
            return kb + left + right
        }
        expectClose(y1, want1, 1e-6, "conv1d")
    }

    @Test func embeddingLooksUpRowsAndLeavesThePaddingRowAlone() throws {
        let emb = try Embedding(5, 3, paddingIndex: 0)
        #expect(try emb.weight[0].toArray() == [0, 0, 0])
        let s = try loadDeterministic(emb)
        let w = try #require(s["weight"]).toArray()
        let idx = try Tensor(integers: [4, 0, 2, 4], shape: [2, 2])
        let y = try emb(idx)
        #expect(y.shape == [2, 2, 3])
        #expect(try y.toArray() == [4, 0, 2, 4].flatMap { Array(w[$0 * 3..<$0 * 3 + 3]) })
        try y.sum().backward()
        let g = try #require(try emb.weight.grad).toArray()
        #expect(g == [0, 0, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 2, 2, 2])
    }

    @Test func layerNormMatchesArithmeticWrittenOut() throws {
        let norm = try LayerNorm(4, eps: 1e-5)
        let s = try loadDeterministic(norm)
        let g = try #require(s["weight"]).toArray(), b = try #require(s["bias"]).toArray()
        let x = Reference.values(8, seed: 3)
        var want: [Float] = []
        for r in 0..<2 {
            let row = x[r * 4..<r * 4 + 4].map(Double.init)
            let mean = row.reduce(0, +) / 4
            let v = row.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / 4
            want += row.enumerated().map { Float(($1 - mean) / (v + 1e-5).squareRoot() * Double(g[$0]) + Double(b[$0])) }
        }
        expectClose(try norm(try Tensor(x, shape: [2, 4])).toArray(), want, 1e-5, "layer_norm")
    }

    @Test func multiheadAttentionIsTheProjectionsAroundAttention() throws {
        let mha = try MultiheadAttention(4, numHeads: 2)
        let s = try loadDeterministic(mha)
        let (l, n, e, h, hd) = (3, 2, 4, 2, 2)
        let q = try Tensor(Reference.values(l * n * e, seed: 11), shape: [l, n, e])
        let kv = try Tensor(Reference.values(l * n * e, seed: 12), shape: [l, n, e])
        let (out, weights) = try mha(q, kv, kv)
        #expect(out.shape == [l, n, e])
        #expect(weights?.shape == [n, l, l])

        // The same engine ops, called directly: bit for bit.
        let w = try #require(s["in_proj_weight"]).chunk(3), b = try #require(s["in_proj_bias"]).chunk(3)
        func heads(_ t: Tensor) throws -> Tensor { try t.reshape([l, n * h, hd]).transpose(0, 1).reshape([n, h, l, hd]) }
        let a = try scaledDotProductAttention(
            query: try heads(try q.linear(w[0], bias: b[0])), key: try heads(try kv.linear(w[1], bias: b[1])),
            value: try heads(try kv.linear(w[2], bias: b[2])))
        let direct = try a.permute([2, 0, 1, 3]).reshape([l * n, e]).linear(try #require(s["out_proj.weight"]), bias: s["out_proj.bias"])
        // (Without the weights, as scaledDotProductAttention returns none.)
        #expect(try mha(q, kv, kv, needWeights: false).output.toArray() == direct.reshape([l, n, e]).toArray())
        expectClose(try out.toArray(), try direct.reshape([l, n, e]).toArray(), 1e-6, "with weights")

        // And against the arithmetic written out, in Double.
        let qa = try q.linear(w[0], bias: b[0]).toArray(), ka = try kv.linear(w[1], bias: b[1]).toArray()
        let va = try kv.linear(w[2], bias: b[2]).toArray()
        var ctx = [Float](repeating: 0, count: l * n * e)
        var avg = [Double](repeating: 0, count: n * l * l)
        for bi in 0..<n {
            for hi in 0..<h {
                for i in 0..<l {
                    let scores = (0..<l).map { j in
                        (0..<hd).reduce(0.0) { acc, d in
                            acc + Double(qa[(i * n + bi) * e + hi * hd + d]) * Double(ka[(j * n + bi) * e + hi * hd + d])
                        } / Double(hd).squareRoot()
                    }
                    let m = scores.max() ?? 0
                    let ex = scores.map { Foundation.exp($0 - m) }
                    let p = ex.map { $0 / ex.reduce(0, +) }
                    for j in 0..<l { avg[(bi * l + i) * l + j] += p[j] / Double(h) }
                    for d in 0..<hd {
                        ctx[(i * n + bi) * e + hi * hd + d] = Float((0..<l).reduce(0.0) { $0 + p[$1] * Double(va[($1 * n + bi) * e + hi * hd + d]) })
                    }
                }
            }
        }
        let ow = try #require(s["out_proj.weight"]).toArray(), ob = try #require(s["out_proj.bias"]).toArray()
        let want = (0..<l * n).flatMap { r in (0..<e).map { o in (0..<e).reduce(ob[o]) { $0 + ctx[r * e + $1] * ow[o * e + $1] } } }
        expectClose(try out.toArray(), want, 1e-5, "multihead attention")
        expectClose(try #require(weights).toArray(), avg.map(Float.init), 1e-5, "attention weights")

        // A key padding mask leaves a key out: its weight is zero.
        let pad = try Tensor(integers: [0, 0, 1, 0, 0, 0], shape: [n, l], dtype: .bool)
        let masked = try #require(try mha(q, kv, kv, keyPaddingMask: pad).weights).toArray()
        #expect((0..<l).allSatisfy { masked[$0 * l + 2] == 0 })
        #expect(masked[l * l + 2] != 0)
        // Causal: no weight above the diagonal.
        let causal = try #require(try mha(q, kv, kv, isCausal: true).weights).toArray()
        #expect(causal[1] == 0 && causal[2] == 0 && causal[5] == 0 && causal[0] == 1)
    }

    @Test func transformerEncoderLayerComposesItsSubmodules() throws {
        for normFirst in [false, true] {
            let layer = try TransformerEncoderLayer(dModel: 4, nhead: 2, dimFeedforward: 6, activation: .gelu, normFirst: normFirst)
            _ = try loadDeterministic(layer)
            layer.eval()
            let x = try Tensor(Reference.values(2 * 3 * 4, seed: 5), shape: [3, 2, 4])
            let sa = try #require(try layer.submodule("self_attn") as? MultiheadAttention)
            let (l1, l2) = (try layer.submodule("linear1"), try layer.submodule("linear2"))
            let (n1, n2) = (try layer.submodule("norm1"), try layer.submodule("norm2"))
            func ff(_ t: Tensor) throws -> Tensor { try l2(try l1(t).gelu()) }
            func attn(_ t: Tensor) throws -> Tensor { try sa(t, t, t, needWeights: false).output }
            let want: Tensor
            if normFirst {
                let y = try x + (try attn(try n1(x)))
                want = try y + (try ff(try n2(y)))
            } else {
                let y = try n1(try x + (try attn(x)))
                want = try n2(try y + (try ff(y)))
            }
            #expect(try layer(x).toArray() == want.toArray(), "normFirst: \(normFirst)")
        }
    }

    @Test func lstmAndGRUMatchTheirEquationsWrittenOut() throws {
        let (steps, batch, inSize, hid) = (3, 2, 2, 3)
        let x = Reference.values(steps * batch * inSize, seed: 21)
        func mat(_ w: [Float], _ row: Int, _ v: ArraySlice<Double>, cols: Int) -> Double {
            zip(w[row * cols..<(row + 1) * cols], v).reduce(0) { $0 + Double($1.0) * $1.1 }
        }

        let lstm = try LSTM(inSize, hid, batchFirst: true)
        let ls = try loadDeterministic(lstm)
        let (wi, wh) = (try #require(ls["weight_ih_l0"]).toArray(), try #require(ls["weight_hh_l0"]).toArray())
        let (bi, bh) = (try #require(ls["bias_ih_l0"]).toArray(), try #require(ls["bias_hh_l0"]).toArray())
        let (out, (hN, cN)) = try lstm(try Tensor(x, shape: [batch, steps, inSize]))
        #expect(out.shape == [batch, steps, hid] && hN.shape == [1, batch, hid] && cN.shape == [1, batch, hid])
        var want = [Float](repeating: 0, count: batch * steps * hid)
        var finals: [Float] = []
        for b in 0..<batch {
            var h = [Double](repeating: 0, count: hid), c = h
            for t in 0..<steps {
                let xv = x[(b * steps + t) * inSize..<(b * steps + t + 1) * inSize].map(Double.init)
                let g = (0..<4 * hid).map { r in mat(wi, r, xv[...], cols: inSize) + mat(wh, r, h[...], cols: hid) + Double(bi[r] + bh[r]) }
                for j in 0..<hid {
                    let (ig, fg, gg, og) = (sigmoid(g[j]), sigmoid(g[hid + j]), Foundation.tanh(g[2 * hid + j]), sigmoid(g[3 * hid + j]))
                    c[j] = fg * c[j] + ig * gg
                    h[j] = og * Foundation.tanh(c[j])
                }
                for j in 0..<hid { want[(b * steps + t) * hid + j] = Float(h[j]) }
            }
            finals += h.map(Float.init)
        }
        expectClose(try out.toArray(), want, 1e-5, "lstm output")
        expectClose(try hN.toArray(), finals, 1e-5, "lstm h_n")

        let gru = try GRU(inSize, hid)
        let gs = try loadDeterministic(gru)
        let (gwi, gwh) = (try #require(gs["weight_ih_l0"]).toArray(), try #require(gs["weight_hh_l0"]).toArray())
        let (gbi, gbh) = (try #require(gs["bias_ih_l0"]).toArray(), try #require(gs["bias_hh_l0"]).toArray())
        let (gout, gh) = try gru(try Tensor(x, shape: [steps, batch, inSize]))
        var gwant = [Float](repeating: 0, count: steps * batch * hid)
        for b in 0..<batch {
            var h = [Double](repeating: 0, count: hid)
            for t in 0..<steps {
                let xv = x[(t * batch + b) * inSize..<(t * batch + b + 1) * inSize].map(Double.init)
                let gi = (0..<3 * hid).map { mat(gwi, $0, xv[...], cols: inSize) + Double(gbi[$0]) }
                let hh = (0..<3 * hid).map { mat(gwh, $0, h[...], cols: hid) + Double(gbh[$0]) }
                h = (0..<hid).map { j in
                    let r = sigmoid(gi[j] + hh[j]), z = sigmoid(gi[hid + j] + hh[hid + j])
                    let n = Foundation.tanh(gi[2 * hid + j] + r * hh[2 * hid + j])
                    return (1 - z) * n + z * h[j]
                }
                for j in 0..<hid { gwant[(t * batch + b) * hid + j] = Float(h[j]) }
            }
        }
        expectClose(try gout.toArray(), gwant, 1e-5, "gru output")
        #expect(try gh.toArray() == gout[steps - 1].toArray())
    }
}

@Suite struct ModuleModeTests {
    @Test func dropoutAndBatchNormFollowTrainAndEval() throws {
        Tensor.manualSeed(3)
        let drop = try Dropout(0.5)
        let ones = try Tensor.ones([1000])
        let trained = try drop(ones).toArray()
        #expect(Set(trained) == [0, 2])
        #expect((400...600).contains(trained.filter { $0 == 0 }.count))
        drop.eval()
        #expect(try drop(ones).toArray() == [Float](repeating: 1, count: 1000))

        let bn = try BatchNorm2d(2, momentum: 0.1)
        let xv: [Float] = [1, 2, 3, 4, 10, 20, 30, 40, 5, 6, 7, 8, -1, -2, -3, -4]
        let x = try Tensor(xv, shape: [2, 2, 2, 2])
        let y = try bn(x).toArray()
        // Channel c holds xv at n*8 + c*4 + k.
        for c in 0..<2 {
            let vals = (0..<2).flatMap { n in (0..<4).map { Double(xv[n * 8 + c * 4 + $0]) } }
            let mean = vals.reduce(0, +) / 8
            let biased = vals.map { ($0 - mean) * ($0 - mean) }.reduce(0, +) / 8
            let got = (0..<2).flatMap { n in (0..<4).map { y[n * 8 + c * 4 + $0] } }
            expectClose(got, vals.map { Float(($0 - mean) / (biased + 1e-5).squareRoot()) }, 1e-5, "batch statistics")
            expectClose([try #require(bn.runningMean).toArray()[c]], [Float(0.1 * mean)], 1e-6, "running mean")
            expectClose([try #require(bn.runningVar).toArray()[c]], [Float(0.9 + 0.1 * biased * 8 / 7)], 1e-5, "running var")
        }
        #expect(try bn.numBatchesTracked?.item() == 1)
        bn.eval()
        let rm = try #require(bn.runningMean).toArray(), rv = try #require(bn.runningVar).toArray()
        let e = try bn(x).toArray()
        let want = (0..<16).map { i -> Float in
            let c = (i / 4) % 2
            return Float((Double(xv[i]) - Double(rm[c])) / (Double(rv[c]) + 1e-5).squareRoot())
        }
        expectClose(e, want, 1e-5, "running statistics")
        #expect(try bn.numBatchesTracked?.item() == 1)
        #expect(try bn.runningMean?.toArray() == rm)
    }

    @Test func gradientsReachEveryParameterAndMatchFiniteDifferences() throws {
        let model = Sequential(
            try Linear(3, 4, dtype: .float64), Tanh(), try LayerNorm(4, dtype: .float64), try Linear(4, 2, dtype: .float64))
        _ = try loadDeterministic(model)
        let x = try Tensor(Reference.values(6, seed: 2), shape: [2, 3], dtype: .float64)
        func loss() throws -> Tensor { try (try model(x) * (try model(x))).sum() }
        try loss().backward()
        for (name, p) in model.namedParameters() {
            let g = try #require(p.grad, "\(name) has no gradient").toArray()
            for i in [0, p.numel - 1] {
                var one = [Float](repeating: 0, count: p.numel)
                one[i] = 1
                let step = try Tensor(one, shape: p.shape, dtype: .float64) * 1e-4
                let diff = try GradMode.with(false) { () -> Float in
                    try p.copy(from: try p + step)
                    let up = try loss()
                    try p.copy(from: try (try p - step) - step)
                    let down = try loss()
                    try p.copy(from: try p + step)
                    return try ((try up - down) / 2e-4).item()
                }
                #expect(Swift.abs(diff - g[i]) <= 1e-4 * (1 + Swift.abs(g[i])), "\(name)[\(i)]: \(diff) vs \(g[i])")
            }
        }

        // Recurrent and attention layers pass gradients to every parameter too.
        for module in [try LSTM(2, 3) as Module, try GRU(2, 3), try MultiheadAttention(4, numHeads: 2), try BatchNorm1d(2)] {
            let out: Tensor
            switch module {
            case let m as LSTM: out = try m(try Tensor.randn([3, 1, 2])).output
            case let m as GRU: out = try m(try Tensor.randn([3, 1, 2])).output
            case let m as MultiheadAttention:
                let q = try Tensor.randn([3, 1, 4])
                out = try m(q, q, q).output
            default: out = try module(try Tensor.randn([4, 2]))
            }
            try (out * out).sum().backward()
            for (name, p) in module.namedParameters() {
                let g = try #require(p.grad, "\(module.typeName).\(name) has no gradient").toArray()
                #expect(g.contains { $0 != 0 }, "\(module.typeName).\(name)")
            }
        }
    }
}

@Suite struct ModuleAutocastTests {
    @Test func autocastPolicyChangesTheDtypeALayerRunsIn() throws {
        let head = try Linear(4, 2)
        _ = try loadDeterministic(head)
        let model = Sequential(try Linear(4, 4), head)
        let x = try Tensor(Reference.values(8, seed: 6), shape: [2, 4])
        #expect(try withAutocast(.cpu, dtype: .bfloat16) { try model(x) }.dtype == .bfloat16)
        head.autocastPolicy = .float32
        let y = try withAutocast(.cpu, dtype: .bfloat16) { try model(x) }
        #expect(y.dtype == .float32)
        // The head ran in float32 on the first layer's bfloat16 output, cast on entry.
        let first = try withAutocast(.cpu, dtype: .bfloat16) { try model[0](x) }
        #expect(try y.toArray() == head(try first.to(.float32)).toArray())
        #expect(try model(x).dtype == .float32)  // outside autocast it changes nothing

        // A CPU float16 scope casts nothing; a bfloat16 policy runs the head in bfloat16 there.
        head.autocastPolicy = nil
        #expect(try withAutocast(.cpu, dtype: .float16) { try head(x) }.dtype == .float32)
        head.autocastPolicy = .bfloat16
        let z = try withAutocast(.cpu, dtype: .float16) { try head(x) }
        #expect(z.dtype == .bfloat16)
        #expect(try z.toArray() == withAutocast(.cpu, dtype: .bfloat16) { try head(x) }.toArray())
        head.autocastPolicy = .int32
        #expect(lucidErrorKind { _ = try withAutocast(.cpu, dtype: .bfloat16) { try head(x) } } == .value)
    }

    @Test func theInspectorRecordsOpsUnderModulePaths() throws {
        let model = Sequential(try Linear(2, 2), ReLU(), Sequential(try Linear(2, 2)))
        _ = try loadDeterministic(model, scale: 1)
        let x = try Tensor([1e5, 1, 2, 3], shape: [2, 2], device: .metal)
        try model.to(device: .metal)
        let (y, report) = try inspect { try withAutocast(.metal, dtype: .float16) { try model(x) } }
        #expect(y.dtype == .float16)
        #expect(report.entries.map { "\($0.module):\($0.op)" }.sorted() == ["0:linear", "1:relu", "2.0:linear"])
        #expect(report.entries.allSatisfy { $0.dtype == .float16 && $0.calls == 1 && $0.device == .metal })
        let first = try #require(report.entries.first)
        #expect(first.module == "0" && first.verdict == .useBFloat16)
        #expect(first.reason.contains("inputs past float16's range"))
        #expect(report.modules.first?.module == "0")
        #expect(report.findings.contains { $0.module == "0" })
        #expect(report.markdown.contains("| `0` | use bfloat16 |"))
        #expect(Autocast.isEnabled(.metal) == false)
        // Outside an inspection nothing is recorded, and an error ends the inspection.
        #expect(throws: LucidError.self) { _ = try inspect { try model(try Tensor.zeros([1, 3], device: .metal)) } }
        let (_, empty) = try inspect { try model(x) }
        #expect(empty.entries.isEmpty)
    }
}

@Suite struct SwiftAPIErrorTests {
    @Test func errorsAreLocalizedAndUseSwiftNames() throws {
        let e = LucidError(.value, "a message")
        #expect(e.localizedDescription == "a message")
        #expect("\(e)" == "a message")

        let a = try Tensor([1, 2], shape: [2]).requiringGrad()
        let y = try (a * a).sum()
        try y.backward()
        let again = lucidError { try y.backward() }
        #expect(again?.message.contains("retainGraph: true") == true, "\(String(describing: again))")
        #expect(again?.message.contains("retain_graph") == false)
        #expect(again?.localizedDescription == again?.message)

        let unused = lucidError {
            let b = try Tensor([1], shape: [1]).requiringGrad()
            _ = try Tensor.gradients(of: [try (a * a).sum()], withRespectTo: [b])
        }
        #expect(unused?.message.contains("allowUnused: true") == true, "\(String(describing: unused))")
        let retain = lucidError { try Tensor([1], shape: [1]).retainGrad() }
        #expect(retain?.message.contains("requiresGrad") == true && retain?.message.contains("requires_grad") == false)
        let q = try Tensor.zeros([1, 2, 2])
        let both = lucidError { _ = try scaledDotProductAttention(query: q, key: q, value: q, mask: q, isCausal: true) }
        #expect(both?.message.contains("pass either mask or isCausal") == true, "\(String(describing: both))")
        let smoothing = lucidError { _ = try crossEntropy(try Tensor.zeros([1, 2]), try Tensor(integers: [0], shape: [1]), labelSmoothing: 2) }
        #expect(smoothing?.message.contains("labelSmoothing must be between") == true, "\(String(describing: smoothing))")
    }
}

@Suite struct PublicOpTests {
    @Test func subscriptsSliceAndSelect() throws {
        let x = try Tensor.arange(0, 12).reshape([3, 4])
        #expect(try x[1].toArray() == [4, 5, 6, 7])
        #expect(try x[.all, 1..<3].toArray() == [1, 2, 5, 6, 9, 10])
        #expect(try x[.slice(step: 2), -1].toArray() == [3, 11])
        #expect(try x[1...].shape == [2, 4])
        #expect(try x[..<1, .newAxis].shape == [1, 1, 4])
        #expect(try x[.ellipsis, 0].toArray() == [0, 4, 8])
        #expect(try x[try Tensor(integers: [2, 0], shape: [2])].toArray() == [8, 9, 10, 11, 0, 1, 2, 3])
        #expect(try x[try x.greater(9)].toArray() == [10, 11])
        #expect(lucidErrorKind { _ = try x[3] } == .index)
    }

    @Test func elementwiseReductionsAndJoins() throws {
        let x = try Tensor([-4, 1, 9, -0.25], shape: [2, 2])
        #expect(try x.abs().toArray() == [4, 1, 9, 0.25])
        #expect(try x.abs().sqrt().toArray() == [2, 1, 3, 0.5])
        #expect(try x.clamp(min: -1, max: 2).toArray() == [-1, 1, 2, -0.25])
        #expect(try x.clamp(max: 0).toArray() == [-4, 0, 0, -0.25])
        #expect(try Tensor.where(try x.greater(0), x, 0).toArray() == [0, 1, 9, 0])
        expectClose(try x.sigmoid().toArray(), [-4, 1, 9, -0.25].map { Float(sigmoid($0)) }, 1e-6, "sigmoid")
        #expect(try x.max().item() == 9)
        #expect(try x.max(dims: [1]).toArray() == [1, 9])
        #expect(try x.min(dims: [0], keepdim: true).toArray() == [-4, -0.25])
        let (v, i) = try x.max(dim: 0)
        #expect(try v.toArray() == [9, 1] && i.toArray() == [1, 0])
        #expect(try Tensor.cat([x, x], dim: 1).shape == [2, 4])
        #expect(try Tensor.stack([x, x]).toArray() == (try x.toArray()) + (try x.toArray()))
        #expect(try x.chunk(2, dim: 1).map { try $0.toArray() } == [[-4, 9], [1, -0.25]])
        #expect(try x.pow(2).sum().item() == 16 + 1 + 81 + 0.0625)
        #expect(try x.flatten().unsqueeze(0).shape == [1, 4])
        #expect(try x.variance(dims: [1], correction: 0).toArray() == [6.25, 21.390625])
    }
}

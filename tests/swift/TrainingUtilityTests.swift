import Foundation
import Testing
@testable import LucidEngine

/// A leaf holding `values` whose gradient, after `backward(through:)`, is `c` exactly.
private func leaf(_ values: [Float], device: Device = .cpu) throws -> Tensor {
    try Tensor(values, shape: [values.count], device: device).requiringGrad()
}

/// Accumulates `c` (times `scale`, through the scaler when given) into `p.grad`: the gradient
/// of sum(p * c).
private func backward(_ p: Tensor, _ c: [Float], scaler: GradScaler? = nil) throws {
    let loss = try (p * Tensor(c, shape: [c.count], device: p.device)).sum()
    try (scaler.map { try $0.scale(loss) } ?? loss).backward()
}

@Suite struct GradScalerTests {
    /// init 8, growth every 2 clean steps, SGD lr 0.5 on p = [1, 2]; by hand:
    /// 1. gradient c·8 with c = [1e38, 1]: 8e38 is inf in float32 -> skipped, scale 4, tracker 0;
    /// 2. c = [1, 2]: unscaled to [1, 2], p = [0.5, 1], tracker 1;
    /// 3. the same: p = [0, 0], tracker 2 = the interval -> scale 8, tracker 0.
    @Test(arguments: [Device.cpu, .metal])
    func skipsAStepWithAnInfiniteGradientBacksOffAndGrowsAfterTheInterval(device: Device) throws {
        let p = try leaf([1, 2], device: device)
        let opt = try SGD([p], lr: 0.5)
        let scaler = try GradScaler(device: device, initScale: 8, growthInterval: 2)
        #expect(try scaler.currentScale() == 8)
        try backward(p, [1e38, 1], scaler: scaler)
        #expect(try p.grad!.toArray() == [.infinity, 8])
        try scaler.step(opt)
        try scaler.update()
        #expect(try p.toArray() == [1, 2])  // skipped on the device
        #expect(try scaler.currentScale() == 4 && scaler.currentGrowthTracker() == 0)
        try opt.zeroGrad()
        try backward(p, [1, 2], scaler: scaler)
        try scaler.unscale(opt)
        #expect(try p.grad!.toArray() == [1, 2])  // unscaled in place
        try scaler.step(opt)
        try scaler.update()
        #expect(try p.toArray() == [0.5, 1])
        #expect(try scaler.currentScale() == 4 && scaler.currentGrowthTracker() == 1)
        try opt.zeroGrad()
        try backward(p, [1, 2], scaler: scaler)
        try scaler.step(opt)
        try scaler.update()
        #expect(try p.toArray() == [0, 0])
        #expect(try scaler.currentScale() == 8 && scaler.currentGrowthTracker() == 0)
        #expect(try scaler.stateDict() == ["scale": 8, "growth_factor": 2, "backoff_factor": 0.5, "growth_interval": 2, "_growth_tracker": 0])
    }

    @Test func adamSkipsItsStepCountToo() throws {
        let p = try leaf([1, -1])
        let opt = try Adam([p], lr: 0.1)
        let scaler = try GradScaler(device: .cpu)
        try backward(p, [.nan, 1], scaler: scaler)
        try scaler.step(opt)
        try scaler.update()
        #expect(try p.toArray() == [1, -1])
        #expect(try scaler.currentScale() == 32768)
        #expect(try opt.stateDict()["state.0.step"]?.item() == 0)
        try opt.zeroGrad()
        try backward(p, [2, -3], scaler: scaler)
        try scaler.step(opt)
        try scaler.update()
        // Adam's first step moves each element by lr against its gradient's sign.
        let moved = try p.toArray()
        #expect(abs(moved[0] - 0.9) < 1e-6 && abs(moved[1] + 0.9) < 1e-6)
        #expect(try opt.stateDict()["state.0.step"]?.item() == 1)
    }

    @Test func misuseIsRefusedWithPreciseErrors() throws {
        let p = try leaf([1])
        let opt = try SGD([p], lr: 0.1)
        let scaler = try GradScaler(device: .cpu)
        #expect(lucidError { try scaler.update() }?.message.contains("no inf checks") == true)
        let onMetal = lucidError { _ = try scaler.scale(try Tensor.ones([1], device: .metal)) }
        #expect(onMetal?.kind == .value && onMetal?.message.contains(".metal") == true)
        try backward(p, [1], scaler: scaler)
        try scaler.unscale(opt)
        #expect(lucidError { try scaler.unscale(opt) }?.message.contains("already been called") == true)
        try scaler.step(opt)
        #expect(lucidError { try scaler.step(opt) }?.message.contains("already been called") == true)
        #expect(lucidError { try scaler.unscale(opt) }?.message.contains("after step(_:)") == true)
        try scaler.update()
        for bad in [
            { _ = try GradScaler(initScale: 0) }, { _ = try GradScaler(growthFactor: 1) },
            { _ = try GradScaler(backoffFactor: 1) }, { _ = try GradScaler(growthInterval: 0) },
        ] as [() throws -> Void] {
            #expect(lucidError(bad)?.kind == .value)
        }
        #expect(lucidError { try scaler.update(newScale: -1) }?.kind == .value)
        try scaler.update(newScale: 1024)
        #expect(try scaler.currentScale() == 1024)
        // A state dict restores the scale and the tracker; a disabled scaler passes through.
        let other = try GradScaler(device: .cpu)
        try other.loadStateDict(try scaler.stateDict())
        #expect(try other.currentScale() == 1024)
        #expect(lucidError { try other.loadStateDict(["scale": 2]) }?.message.contains("lacks") == true)
        let off = try GradScaler(device: .cpu, enabled: false)
        let loss = try Tensor.ones([1])
        #expect(try off.scale(loss).toArray() == [1] && off.currentScale() == 1)
    }
}

@Suite struct OptimizerStateTests {
    /// Trains `opt` on the quadratic sum((p - t)^2) for `steps` steps.
    private func train(_ opt: Optimizer, _ p: Tensor, steps: Int) throws {
        let t = try Tensor([0.5, -1, 2], shape: [3])
        for _ in 0..<steps {
            try opt.zeroGrad()
            let d = try p - t
            try (d * d).sum().backward()
            try opt.step()
        }
    }

    @Test(arguments: ["adam", "sgd"])
    func aStateRoundTripThroughAFileContinuesTrainingIdentically(kind: String) throws {
        func make(_ p: Tensor) throws -> Optimizer {
            kind == "adam" ? try Adam([p], lr: 0.05, betas: (0.8, 0.9)) : try SGD([p], lr: 0.05, momentum: 0.9, dampening: 0.1)
        }
        let p = try leaf([1, 2, 3])
        let opt = try make(p)
        try train(opt, p, steps: 3)
        opt.lr = 0.02
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("opt-\(kind)-\(UInt32.random(in: 0..<UInt32.max)).safetensors").path
        try saveSafetensors(try opt.stateDict().merging(["p": p.detach()]) { a, _ in a }, to: path)
        var saved = try loadSafetensors(path)
        let start = try saved.removeValue(forKey: "p")!.toArray()
        let q = try leaf(start)
        let resumed = try make(q)
        try resumed.loadStateDict(saved)
        #expect(resumed.lr == 0.02)
        try train(opt, p, steps: 4)
        try train(resumed, q, steps: 4)
        #expect(try p.toArray() == q.toArray())
        let names = Set(try opt.stateDict().keys)
        #expect(
            names
                == (kind == "adam"
                    ? ["state.0.step", "state.0.exp_avg", "state.0.exp_avg_sq", "param_groups.0.lr"]
                    : ["state.0.momentum_buffer", "param_groups.0.lr"]))
        // Without the state, the same steps go elsewhere: the state mattered.
        let r = try leaf(start)
        let fresh = try make(r)
        fresh.lr = 0.02
        try train(fresh, r, steps: 4)
        #expect(try r.toArray() != p.toArray())
    }

    @Test func adamStateIsNamedAsPyTorchNamesItAndChecked() throws {
        let p = try leaf([1, 2, 3])
        let opt = try Adam([p], lr: 0.1)
        #expect(try opt.stateDict().keys.sorted() == ["param_groups.0.lr"])  // no state before a step
        try train(opt, p, steps: 2)
        let state = try opt.stateDict()
        #expect(try state["state.0.step"]?.item() == 2 && state["state.0.step"]?.dtype == .float32)
        #expect(state["state.0.exp_avg"]?.shape == [3])
        let q = try leaf([0, 0, 0])
        let other = try Adam([q], lr: 0.1)
        let unknown = lucidError { try other.loadStateDict(["state.0.momentum_buffer": try Tensor.zeros([3])]) }
        #expect(unknown?.kind == .value && unknown?.message.contains("unexpected key 'state.0.momentum_buffer'") == true)
        #expect(lucidError { try other.loadStateDict(["state.3.step": try Tensor.zeros([])]) }?.kind == .index)
        #expect(lucidError { try other.loadStateDict(["state.0.step": try Tensor.zeros([])]) }?.message.contains("lacks") == true)
        var wrongShape = state
        wrongShape["state.0.exp_avg"] = try Tensor.zeros([2])
        #expect(lucidError { try other.loadStateDict(wrongShape) }?.message.contains("has shape [2]") == true)
        #expect(try other.stateDict().keys.sorted() == ["param_groups.0.lr"])  // a refused load changes nothing
    }

    @Test func theLearningRateIsSettable() throws {
        let p = try leaf([1, 2])
        let opt = try SGD([p], lr: 0.5)
        opt.lr = 0
        try backward(p, [1, 1])
        try opt.step()
        #expect(try p.toArray() == [1, 2])
        opt.lr = 0.25
        try opt.step()
        #expect(try p.toArray() == [0.75, 1.75])
        opt.lr = -1
        #expect(lucidError { try opt.step() }?.kind == .value)
    }

    @Test func clipGradNormMatchesAHandComputation() throws {
        let a = try leaf([0, 0]), b = try leaf([0])
        try backward(a, [3, 4])
        try backward(b, [12])
        // The 2-norm of (3, 4, 12) is 13; the 1-norm 19; the inf-norm 12.
        let norm = try clipGradNorm([a, b], maxNorm: 6.5)
        #expect(try norm.item() == 13 && norm.dtype == .float32 && norm.shape == [])
        let coef = Float(6.5 / (13 + 1e-6))
        #expect(try a.grad!.toArray() == [3 * coef, 4 * coef] && b.grad!.toArray() == [12 * coef])
        let c = try leaf([0, 0])
        try backward(c, [-3, 4])
        #expect(try clipGradNorm([c], maxNorm: 100, normType: 1).item() == 7)
        #expect(try c.grad!.toArray() == [-3, 4])  // under the limit: unchanged
        #expect(try clipGradNorm([c], maxNorm: 2, normType: .infinity).item() == 4)
        let k = Float(2 / (4 + 1e-6))
        #expect(try c.grad!.toArray() == [-3 * k, 4 * k])
        #expect(try clipGradNorm([try leaf([1])], maxNorm: 1).item() == 0)  // no gradient
        #expect(lucidError { try clipGradNorm([a], maxNorm: 1, normType: 0) }?.kind == .value)
    }

    @Test func clipGradNormOfAThreeNormAgainstDouble() throws {
        let a = try leaf([0, 0, 0])
        try backward(a, [1, -2, 3])
        let want = pow(1.0 + 8 + 27, 1.0 / 3)
        #expect(abs(Double(try clipGradNorm([a], maxNorm: 1e9, normType: 3).item()) - want) < 1e-5)
    }
}

@Suite struct LRSchedulerTests {
    @Test func stepLRFollowsItsClosedForm() throws {
        let opt = try SGD([try leaf([1])], lr: 0.1)
        let schedule = try StepLR(opt, stepSize: 3, gamma: 0.5)
        var seen: [Double] = [opt.lr]
        for _ in 0..<9 {
            schedule.step()
            seen.append(opt.lr)
        }
        #expect(seen == (0..<10).map { 0.1 * pow(0.5, Double($0 / 3)) })
        #expect(seen[3] == 0.05 && seen[9] == 0.0125 && schedule.lastEpoch == 9 && schedule.lastLR == 0.0125)
    }

    @Test func cosineAnnealingFollowsItsClosedForm() throws {
        let opt = try SGD([try leaf([1])], lr: 0.1)
        let schedule = try CosineAnnealingLR(opt, tMax: 10, etaMin: 0.01)
        #expect(opt.lr == 0.1)
        for epoch in 1...20 {
            schedule.step()
            // Python's lucid.optim.lr_scheduler evaluates the same expression.
            #expect(opt.lr == 0.01 + (0.1 - 0.01) * (1 + cos(Double.pi * Double(epoch) / 10)) / 2)
        }
        #expect(abs(schedule.lr(at: 5) - 0.055) < 1e-15 && schedule.lr(at: 10) == 0.01)
    }

    @Test func aScheduleResumesFromAnOptimizerStateDict() throws {
        let opt = try SGD([try leaf([1])], lr: 0.1)
        let schedule = try StepLR(opt, stepSize: 2, gamma: 0.1)
        for _ in 0..<3 { schedule.step() }
        #expect(abs(opt.lr - 0.01) < 1e-15)
        let state = try opt.stateDict()
        #expect(try state["param_groups.0.initial_lr"]?.to(.float64).item() == 0.1)
        let again = try SGD([try leaf([1])], lr: 0.5)
        #expect(lucidError { _ = try StepLR(again, stepSize: 2, gamma: 0.1, lastEpoch: 3) }?.message.contains("initialLR") == true)
        try again.loadStateDict(state)
        let resumed = try StepLR(again, stepSize: 2, gamma: 0.1, lastEpoch: 3)
        #expect(resumed.lastEpoch == 4 && abs(again.lr - 0.001) < 1e-15)
        #expect(lucidError { _ = try StepLR(again, stepSize: 0) }?.kind == .value)
        #expect(lucidError { _ = try CosineAnnealingLR(again, tMax: 5, etaMin: -1) }?.kind == .value)
        #expect(lucidError { _ = try StepLR(again, stepSize: 1, lastEpoch: -2) }?.kind == .value)
    }
}
